"""The two layers of a quantization-aware model: `QuantizedLinear` and `ActivationQuantizer`.

`quantize_model` (`zoo.quantization.transform`) rewrites a float model with them; they
compute, in float, exactly what the int8 model the TFLite converter writes will compute,
so training sees (and learns around) the rounding of deployment.

BatchNorm folding follows Jacob et al. 2018 (https://arxiv.org/abs/1712.05877, Section 3.2
and Figure C.8) and Krishnamoorthi 2018, "Quantizing deep convolutional networks for
efficient inference: A whitepaper", Section 3.2 (https://arxiv.org/abs/1806.08342): the
weights are folded with the *moving* standard deviation, the form the converter writes,
and quantized per output channel; in training, the output is rescaled by
sigma_moving / sigma_batch and shifted with the batch mean, so the layer still normalizes
with batch statistics (and updates the moving ones) while every weight it uses is on the
deployed grid.
"""

from __future__ import annotations

import keras
from keras import ops

from zoo.quantization.fake_quant import fake_quant_per_channel, fake_quant_per_tensor, fake_quant_symmetric

LINEAR_LAYERS = ("Conv1D", "Conv2D", "DepthwiseConv2D", "Dense")


@keras.saving.register_keras_serializable(package="zoo")
class QuantizedLinear(keras.layers.Layer):
    """A Conv1D/Conv2D/DepthwiseConv2D/Dense, with the BatchNormalization after it folded in, fake-quantized.

    Args:
        layer: the serialized float layer (`keras.layers.serialize(conv)`); its weights are this layer's.
        batch_norm: the serialized BatchNormalization that followed it, or None.

    The output is `activation(op(x, Q(w * gamma / sigma)) * c + b)`, where `Q` is per-channel
    symmetric int8 fake quantization, `c = sigma_moving / sigma_batch` in training and 1 in
    inference, and `b` the folded bias (see the module docstring). The activation is the float
    layer's own (e.g. `Conv2D(activation="relu")`); an `ActivationQuantizer` follows the layer.
    """

    def __init__(self, layer: dict, batch_norm: dict | None = None, **kwargs):
        super().__init__(**kwargs)
        self.inner = keras.layers.deserialize(layer)
        if type(self.inner).__name__ not in LINEAR_LAYERS:
            raise ValueError(f"QuantizedLinear wraps one of {LINEAR_LAYERS}. Received: {type(self.inner).__name__}")
        if getattr(self.inner, "data_format", "channels_last") != "channels_last":
            raise ValueError(f"QuantizedLinear needs channels_last. Received: {self.inner.name} with "
                             f"data_format={self.inner.data_format!r}")
        self.batch_norm = keras.layers.deserialize(batch_norm) if batch_norm else None  # its axis: see build
        self._layer_config = layer
        self._batch_norm_config = batch_norm

    @property
    def kind(self) -> str:
        return type(self.inner).__name__

    def build(self, input_shape):
        # A serialized layer carries its build config, so `deserialize` may have built it already.
        if not self.inner.built:
            self.inner.build(input_shape)
        if self.batch_norm is not None:
            out_shape = self.inner.compute_output_shape(input_shape)
            if not self.batch_norm.built:
                self.batch_norm.build(out_shape)
            # 1.0: BatchNorm frozen, trains with the moving statistics (set by the QAT train_step feature).
            self.bn_frozen = self.add_weight(shape=(), initializer="zeros", trainable=False, name="bn_frozen")
            axis = self.batch_norm.axis if isinstance(self.batch_norm.axis, int) else self.batch_norm.axis[0]
            if axis % len(out_shape) != len(out_shape) - 1:
                raise ValueError(f"Only a BatchNormalization over the channel (last) axis can be folded into "
                                 f"{self.inner.name}. Received: axis={self.batch_norm.axis}")

    def compute_output_shape(self, input_shape):
        return self.inner.compute_output_shape(input_shape)

    # ------------------------------------------------------------------ the arithmetic
    def _op(self, x, kernel):
        inner = self.inner
        if self.kind == "Dense":
            return ops.matmul(x, kernel)
        if self.kind == "DepthwiseConv2D":
            return keras.ops.depthwise_conv(x, kernel, strides=inner.strides, padding=inner.padding,
                                            dilation_rate=inner.dilation_rate, data_format="channels_last")
        return inner.convolution_op(x, kernel)

    def _channels(self, per_channel, kernel):
        """A per-output-channel vector shaped to multiply `kernel`."""
        if self.kind == "DepthwiseConv2D":  # kernel (kh, kw, in, multiplier); channel = in * multiplier + m
            return ops.reshape(per_channel, kernel.shape[-2:])
        return per_channel

    def _quantize_kernel(self, kernel):
        if self.kind == "Dense":  # per tensor: see zoo.quantization.fake_quant
            return fake_quant_symmetric(kernel)
        if self.kind == "DepthwiseConv2D":  # per output channel = per (in, multiplier) pair
            shape = kernel.shape
            flat = ops.reshape(kernel, (*shape[:-2], shape[-2] * shape[-1]))
            return ops.reshape(fake_quant_per_channel(flat), shape)
        return fake_quant_per_channel(kernel)

    def folded(self):
        """(kernel, bias) of the inference graph: BatchNorm folded with the moving statistics, not yet quantized."""
        kernel = ops.convert_to_tensor(self.inner.kernel)
        bias = ops.convert_to_tensor(self.inner.bias) if self.inner.use_bias else None
        if self.batch_norm is None:
            return kernel, bias
        gamma, beta, mean, sigma = self._bn_parameters()
        scale = gamma / sigma
        kernel = kernel * self._channels(scale, kernel)
        shift = beta + ((bias if bias is not None else 0.0) - mean) * scale
        return kernel, shift

    def _bn_parameters(self):
        bn = self.batch_norm
        mean = ops.convert_to_tensor(bn.moving_mean)
        gamma = ops.convert_to_tensor(bn.gamma) if bn.scale else ops.ones_like(mean)
        beta = ops.convert_to_tensor(bn.beta) if bn.center else ops.zeros_like(mean)
        sigma = ops.sqrt(ops.convert_to_tensor(bn.moving_variance) + bn.epsilon)
        return gamma, beta, mean, sigma

    def call(self, x, training=None):
        x = ops.cast(x, "float32")
        if self.batch_norm is None or not training:
            y = self._infer(x)
        else:
            bn = self.batch_norm
            moving_mean, moving_var = bn.moving_mean.value, bn.moving_variance.value
            frozen = self.bn_frozen.value > 0
            # The branches compute, the moving statistics are updated outside them (JAX's cannot assign).
            y, batch_mean, batch_var = ops.cond(
                frozen, lambda: (self._infer(x), moving_mean, moving_var), lambda: self._train_with_batch_statistics(x))
            momentum = float(bn.momentum)
            for moving, batch in ((bn.moving_mean, batch_mean), (bn.moving_variance, batch_var)):
                updated = moving.value * momentum + ops.stop_gradient(batch) * (1 - momentum)
                moving.assign(ops.where(frozen, moving.value, updated))
        return self.inner.activation(y) if self.inner.activation is not None else y

    def _infer(self, x):
        kernel, bias = self.folded()
        y = self._op(x, self._quantize_kernel(kernel))
        return y if bias is None else y + bias

    def _train_with_batch_statistics(self, x):
        """(output, batch mean, batch variance): the layer's training output on the batch's statistics."""
        bn = self.batch_norm
        kernel = ops.convert_to_tensor(self.inner.kernel)
        bias = ops.convert_to_tensor(self.inner.bias) if self.inner.use_bias else 0.0
        # The float pre-activation gives the batch statistics, as BatchNormalization computes them.
        z = self._op(x, kernel) + bias
        axes = list(range(len(z.shape) - 1))
        batch_mean, batch_var = ops.moments(z, axes)
        gamma, beta, _, sigma_moving = self._bn_parameters()
        sigma_batch = ops.sqrt(batch_var + bn.epsilon)
        folded = kernel * self._channels(gamma / sigma_moving, kernel)
        y = self._op(x, self._quantize_kernel(folded)) * (sigma_moving / sigma_batch)
        return y + beta + (bias - batch_mean) * gamma / sigma_batch, batch_mean, batch_var

    def get_config(self):
        return {**super().get_config(), "layer": self._layer_config, "batch_norm": self._batch_norm_config}


@keras.saving.register_keras_serializable(package="zoo")
class ActivationQuantizer(keras.layers.Layer):
    """Per-tensor int8 fake quantization of an activation, with its range learned from the data.

    In training the range is an exponential moving average of the batch minimum and maximum
    (`ema_decay`; the first batch sets it), the quantizer of Jacob et al. 2018, Section 3.1.
    In inference it is fixed: the range the converter writes into the int8 model.
    `calibrate` (zoo.quantization.transform) sets it from data without training.
    """

    def __init__(self, ema_decay: float = 0.99, **kwargs):
        super().__init__(**kwargs)
        if not 0 <= ema_decay < 1:
            raise ValueError(f"ema_decay must be in [0, 1). Received: ema_decay={ema_decay!r}")
        self.ema_decay = float(ema_decay)
        self.observing = False  # set by `calibrate`: record the range, pass values through in float

    def build(self, input_shape):
        def var(name):
            return self.add_weight(shape=(), initializer="zeros", trainable=False, name=name, aggregation="mean")

        self.minimum, self.maximum, self.initialized = var("minimum"), var("maximum"), var("initialized")

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, x, training=None):
        x = ops.cast(x, "float32")
        minimum, maximum = self.minimum.value, self.maximum.value
        seen = self.initialized.value > 0
        if self.observing:
            lo, hi = ops.min(x), ops.max(x)
            self.minimum.assign(ops.where(seen, ops.minimum(minimum, lo), lo))
            self.maximum.assign(ops.where(seen, ops.maximum(maximum, hi), hi))
            self.initialized.assign(1.0)
            return x
        if training:
            lo, hi = ops.stop_gradient(ops.min(x)), ops.stop_gradient(ops.max(x))
            d = self.ema_decay
            self.minimum.assign(ops.where(seen, d * minimum + (1 - d) * lo, lo))
            self.maximum.assign(ops.where(seen, d * maximum + (1 - d) * hi, hi))
            self.initialized.assign(1.0)
        return fake_quant_per_tensor(x, self.minimum, self.maximum)

    def get_config(self):
        return {**super().get_config(), "ema_decay": self.ema_decay}
