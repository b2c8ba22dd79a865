"""`Conv2D` whose 1x1 convolutions train as matmuls; every family uses it.

A 1x1 convolution with stride 1 is a matmul: `(batch * h * w, in) @ (in, out)`. On CPU, TensorFlow
hands it to oneDNN as a convolution instead. There, every call of the forward pass and of both
gradients reorders the kernel into a blocked layout and back. On small maps the weight gradient runs
at a fraction of the matmul rate, and the 1x1 convolutions and their reorders take a large share of
a small-image MobileNetV2 step (`ONEDNN_VERBOSE=1`).

Written as a matmul, the same layer runs on oneDNN's matmul, and so do both of its gradients, which
takes less time on every map size MobileNetV2 has at 32x32 (the figures:
`results/layers/README.md`).

As with `zoo.architectures.batch_norm`, this is a drop-in subclass: same arguments, weights, config
and, outside training, the parent's `call`. Inference and export therefore see the convolution the
converters fuse with its bias and activation; only a training call of a 1x1, stride-1, ungrouped,
undilated, channels-last convolution takes the matmul.
"""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="zoo")
class Conv2D(keras.layers.Conv2D):
    """`keras.layers.Conv2D` whose 1x1 training step is a matmul; see the module docstring."""

    def takes_matmul(self, inputs, training) -> bool:
        """True where the training step is a matmul (TensorFlow, 1x1, stride 1, channels last)."""
        return (
            keras.backend.backend() == "tensorflow"
            and training is True
            and self.trainable
            and self.data_format == "channels_last"
            and tuple(self.kernel_size) == (1, 1)
            and tuple(self.strides) == (1, 1)
            and tuple(self.dilation_rate) == (1, 1)
            and self.groups == 1
            and inputs.shape[-1] is not None
        )

    def call(self, inputs, training=None):
        if not self.takes_matmul(inputs, training):
            return super().call(inputs)
        import tensorflow as tf  # takes_matmul holds only on the TensorFlow backend

        channels = inputs.shape[-1]
        kernel = tf.reshape(tf.convert_to_tensor(self.kernel), (channels, self.filters))
        outputs = tf.matmul(tf.reshape(inputs, (-1, channels)), kernel)
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, self.bias)
        outputs = tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [self.filters]], axis=0))
        outputs.set_shape(inputs.shape[:-1] + (self.filters,))
        return self.activation(outputs) if self.activation is not None else outputs
