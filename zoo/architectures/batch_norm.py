"""`BatchNormalization` that trains with TensorFlow's fused kernel; every family uses it.

Keras 3's `BatchNormalization` computes a training step from separate ops
(`moments`, then `batch_normalization`), and autodiff through them builds a
dozen elementwise kernels per layer, each a full pass over the activations.
TensorFlow's `FusedBatchNormV3` (and its gradient) does the same in one pass
each way, with oneDNN on CPU, so `convnet_bn` trains faster with it and the
ResNets and MobileNetV2 gain more, having a BN after every conv
(`results/layers/README.md`; `python scripts/benchmark.py training` trains
each model against the same graph built from stock Keras layers).

The layer is a drop-in subclass: same arguments, weights, config and
inference path (the parent's `call`), so exports and weight transfer from
`keras.applications` are unchanged. The fused path is taken only where it
computes exactly what the parent computes: TensorFlow backend, training,
normalisation over the last axis of a rank-3 to rank-5 input (sequences are
viewed as `(batch, steps, 1, channels)` images, volumes as `(batch, d, h*w,
channels)`), no mask, renorm or synchronisation, with both `center` and
`scale`. Rank-2 inputs (after a Dense layer) stay on the parent's path: for
a (128, 512) batch the fused kernel's fixed cost outweighs its saving
(`results/layers/README.md`).
"""

from __future__ import annotations

import keras

FUSED_RANKS = (3, 4, 5)


@keras.saving.register_keras_serializable(package="zoo")
class BatchNormalization(keras.layers.BatchNormalization):
    """`keras.layers.BatchNormalization` with a fused training kernel; see the module docstring."""

    def fusable(self, inputs, training, mask=None) -> bool:
        """True where the training step takes the fused kernel (and computes what the parent would)."""
        rank = len(inputs.shape)
        return (
            keras.backend.backend() == "tensorflow"
            and training is True
            and self.trainable
            and mask is None
            and rank in FUSED_RANKS
            and self.axis % rank == rank - 1
            and inputs.shape[-1] is not None
            and not self.renorm
            and not self.synchronized
            and self.center
            and self.scale
        )

    def call(self, inputs, training=None, mask=None):
        if not self.fusable(inputs, training, mask):
            return super().call(inputs, training=training, mask=mask)
        import tensorflow as tf  # fusable holds only on the TensorFlow backend

        # As the parent: statistics and normalisation in float32 whatever the input dtype.
        x = tf.cast(inputs, tf.float32)
        rank = len(inputs.shape)
        if rank != 4:  # the kernel takes NHWC images: fold the other axes into H
            x = tf.reshape(x, tf.stack([tf.shape(x)[0], -1, 1, inputs.shape[-1]]))
        y, mean, variance = tf.compat.v1.nn.fused_batch_norm(
            x, tf.cast(self.gamma, tf.float32), tf.cast(self.beta, tf.float32), epsilon=self.epsilon,
            is_training=True, data_format="NHWC",
        )
        if rank != 4:
            y = tf.reshape(y, tf.shape(inputs))
        # The kernel returns the Bessel-corrected variance; Keras' moving average uses the biased one.
        n = tf.cast(tf.size(x) // tf.shape(x)[-1], tf.float32)
        variance = variance * (n - 1.0) / tf.maximum(n, 1.0)
        momentum = tf.cast(self.momentum, tf.float32)
        self.moving_mean.assign(tf.cast(self.moving_mean, tf.float32) * momentum + mean * (1.0 - momentum))
        self.moving_variance.assign(
            tf.cast(self.moving_variance, tf.float32) * momentum + variance * (1.0 - momentum))
        return tf.cast(y, self.compute_dtype)
