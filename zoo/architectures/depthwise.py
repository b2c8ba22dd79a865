"""`DepthwiseConv2D` whose gradients on small images are batched matmuls; every family uses it.

On CPU, TensorFlow hands the depthwise kernel gradient (`DepthwiseConv2dNativeBackpropFilter`) to
oneDNN. When the image is about the kernel's size or smaller, as in the last stages of MobileNet or
EfficientNet on 32x32 inputs (1x1 and 2x2 maps under a 3x3 kernel), oneDNN's depthwise kernel
declines the shape (`ONEDNN_VERBOSE=1` shows `jit:avx512_core` instead of `jit_dw`). The fallback
is its generic grouped convolution, whose weight layout pads each one-channel group to a 16x16
block, so it does 256 times the useful work, a sizeable share of a small-image MobileNetV2 step.

For such images this layer computes both gradients another way, exact for any stride, padding,
dilation and depth multiplier. Flatten the spatial axes. Per channel, form the gram matrix of output
and input pixels over the batch, `G[c, p, q] = sum_n dy[n, p, c] * x[n, q, c]`: one batched matmul
with the channels as the batch. A constant 0/1 tensor `A[tap, p, q]`, built from the convolution's
geometry, says which (p, q) pairs each kernel tap connects, so `dW[tap, c] = sum_pq A[tap, p, q] *
G[c, p, q]`. The input gradient goes through the same selection: `dx[n, q, c] = sum_p dy[n, p, c] *
(sum_tap A[tap, p, q] * W[tap, c])`. (TensorFlow's own `DepthwiseConv2dNativeBackpropInput`
silently ignores dilation on CPU, so it could not serve here.)

`G` has `out_pixels * in_pixels` entries per channel, against `out_pixels * taps` multiply-adds for
the direct gradient. The path is therefore taken only when the input has fewer pixels than the
kernel has taps, where it is the smaller computation; there it is faster for every kernel size, and
a MobileNetV2 training step on 32x32 images costs fewer CPU-seconds with it, fewer again with
`zoo.architectures.conv2d` (the figures, measured ABBA in one process: `results/layers/README.md`).

As with `zoo.architectures.batch_norm`, this is a drop-in subclass: same arguments, weights, config
and forward op. Inference and export run the parent's `call` unchanged; only a training call on
such a small image takes the custom gradient.
"""

from __future__ import annotations

import functools

import keras
import numpy as np


def _same_padding_before(size: int, out: int, kernel: int, stride: int, dilation: int) -> int:
    """TensorFlow's `"SAME"` padding before the first pixel (the extra pixel, if any, goes after)."""
    return max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0) // 2


@functools.lru_cache(maxsize=64)
def tap_selection(in_hw: tuple, out_hw: tuple, kernel: tuple, strides: tuple, dilation: tuple,
                  padding: str) -> np.ndarray:
    """`A[tap, p, q] = 1` where kernel tap `tap` connects output pixel `p` to input pixel `q` (row-major).

    Output pixel (i, j) reads input pixel (i * s - pad + ki * d, j * s - pad + kj * d) through tap
    (ki, kj); reads that land in the padding connect nothing.
    """
    (h, w), (oh, ow), (kh, kw), (sh, sw), (dh, dw) = in_hw, out_hw, kernel, strides, dilation
    top = _same_padding_before(h, oh, kh, sh, dh) if padding == "same" else 0
    left = _same_padding_before(w, ow, kw, sw, dw) if padding == "same" else 0
    a = np.zeros((kh * kw, oh * ow, h * w), np.float32)
    for ki in range(kh):
        for kj in range(kw):
            for i in range(oh):
                for j in range(ow):
                    y, x = i * sh - top + ki * dh, j * sw - left + kj * dw
                    if 0 <= y < h and 0 <= x < w:
                        a[ki * kw + kj, i * ow + j, y * w + x] = 1.0
    return a


def depthwise_conv2d_gram(x, kernel, strides: tuple, padding: str, dilation: tuple):
    """`tf.nn.depthwise_conv2d(x, kernel)` (NHWC) whose gradients are the gram matmuls above."""
    import tensorflow as tf  # the TensorFlow backend's fast path only
    _, h, w, channels = x.shape
    kh, kw, _, multiplier = kernel.shape
    tf_padding = padding.upper()

    @tf.custom_gradient
    def conv(x, kernel):
        y = tf.nn.depthwise_conv2d(x, kernel, (1, *strides, 1), tf_padding, dilations=dilation)
        oh, ow = y.shape[1], y.shape[2]

        def grad(dy):
            # One small matmul per output channel, batched with the channels leading (an einsum put two
            # transposes inside each call and was slower: results/layers/README.md). In float32 whatever
            # the compute dtype, as the sums run over the batch.
            batch, pixels_in, pixels_out = tf.shape(x)[0], h * w, oh * ow
            # (channels*multiplier, pixels, batch) and (channels*multiplier, batch, pixels); output
            # channel c*multiplier + j reads input channel c.
            dys = tf.transpose(tf.reshape(tf.cast(dy, tf.float32), (batch, pixels_out, -1)), (2, 1, 0))
            xs = tf.transpose(tf.reshape(tf.cast(x, tf.float32), (batch, pixels_in, channels)), (2, 0, 1))
            if multiplier > 1:
                xs = tf.repeat(xs, multiplier, axis=0)
            taps = tf.constant(tap_selection((h, w), (oh, ow), (kh, kw), tuple(strides), tuple(dilation), padding))
            taps = tf.reshape(taps, (kh * kw, pixels_out * pixels_in))
            gram = tf.reshape(tf.matmul(dys, xs), (-1, pixels_out * pixels_in))
            dk = tf.reshape(tf.matmul(taps, gram, transpose_b=True), kernel.shape)
            # The input gradient through the same selection: the kernel spread over (p, q) pairs.
            spread = tf.matmul(tf.reshape(tf.cast(kernel, tf.float32), (kh * kw, -1)), taps, transpose_a=True)
            dxs = tf.matmul(dys, tf.reshape(spread, (-1, pixels_out, pixels_in)), transpose_a=True)
            dx = tf.reduce_sum(tf.reshape(tf.transpose(dxs, (1, 2, 0)), (batch, pixels_in, channels, multiplier)), -1)
            return tf.cast(tf.reshape(dx, tf.shape(x)), x.dtype), tf.cast(dk, kernel.dtype)

        return y, grad

    return conv(x, kernel)


@keras.saving.register_keras_serializable(package="zoo")
class DepthwiseConv2D(keras.layers.DepthwiseConv2D):
    """`keras.layers.DepthwiseConv2D` with cheap gradients on small images; see the module docstring."""

    def takes_gram_gradient(self, inputs, training) -> bool:
        """True where the training step takes the gram gradients (TensorFlow, NHWC, a known image with
        fewer pixels than the kernel has taps)."""
        h, w = inputs.shape[1:3]
        return (
            keras.backend.backend() == "tensorflow"
            and training is True
            and self.trainable
            and self.data_format == "channels_last"
            and h is not None
            and w is not None
            and inputs.shape[-1] is not None
            and h * w < self.kernel_size[0] * self.kernel_size[1]
        )

    def call(self, inputs, training=None):
        if not self.takes_gram_gradient(inputs, training):
            return super().call(inputs)
        import tensorflow as tf  # takes_gram_gradient holds only on the TensorFlow backend

        kernel = tf.convert_to_tensor(self.kernel)  # the read (autocast under mixed precision) stays outside
        outputs = depthwise_conv2d_gram(inputs, kernel, self.strides, self.padding, self.dilation_rate)
        if self.use_bias:
            outputs = outputs + self.bias  # channels_last: the bias broadcasts over the last axis
        return self.activation(outputs) if self.activation is not None else outputs
