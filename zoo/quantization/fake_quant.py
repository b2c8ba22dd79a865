"""Fake quantization: float in, float out, rounded to the int8 grid the deployed model will use.

The two schemes of TFLite's int8 specification (https://ai.google.dev/edge/litert/models/quantization_spec),
which the TFLite converter and onnxruntime's QDQ kernels share:

- weights: per output channel, symmetric, narrow range [-127, 127], zero point 0;
  scale_c = max|w_c| / 127. Dense kernels per tensor (scale = max|w| / 127): the spec's
  FULLY_CONNECTED weights, and tfmot's default scheme; the converter rejects a per-channel
  FakeQuant on them ("'tfl.transpose' op has mismatched quantized axes", TF 2.21: it
  transposes FC weights to (out, in) after quantizing);
- activations: per tensor, asymmetric [-128, 127], min/max from the data, nudged so
  that 0.0 is exactly representable (Jacob et al. 2018, "Quantization and Training of
  Neural Networks for Efficient Integer-Arithmetic-Only Inference", Section 2.1,
  https://arxiv.org/abs/1712.05877).

Both go through `keras.quantizers.fake_quant_with_min_max_vars`: on TensorFlow it is
TensorFlow's own `FakeQuantWithMinMaxVars[PerChannel]` op, so the TFLite converter reads the
ranges from the graph (its quantization-aware-training mode); on JAX and PyTorch the same
nudged arithmetic in `keras.ops`. The gradients are the straight-through estimator (Bengio
et al. 2013): identity inside the range, zero outside.
"""

from __future__ import annotations

import keras
from keras import ops

NUM_BITS = 8
WEIGHT_QMAX = 2 ** (NUM_BITS - 1) - 1  # 127: narrow range, symmetric


def fake_quant_per_channel(weights, axis: int = -1):
    """Symmetric per-channel fake quantization of `weights` along `axis` (the output channels).

    The range follows the weights (the last value, not an average): what the converter
    will quantize them to. It is held constant for the gradient (straight-through).
    """
    w = ops.convert_to_tensor(weights)
    axis = axis % len(w.shape)
    others = tuple(i for i in range(len(w.shape)) if i != axis)
    bound = ops.stop_gradient(ops.max(ops.abs(w), axis=others))
    bound = ops.maximum(bound, 1e-8)  # an all-zero channel stays zero
    return keras.quantizers.fake_quant_with_min_max_vars(w, -bound, bound, num_bits=NUM_BITS, narrow_range=True,
                                                         axis=axis)


def fake_quant_symmetric(weights):
    """Symmetric per-tensor fake quantization of `weights` (narrow range, zero point 0)."""
    w = ops.convert_to_tensor(weights)
    bound = ops.maximum(ops.stop_gradient(ops.max(ops.abs(w))), 1e-8)
    return keras.quantizers.fake_quant_with_min_max_vars(w, -bound, bound, num_bits=NUM_BITS, narrow_range=True)


def fake_quant_per_tensor(x, minimum, maximum):
    """Asymmetric per-tensor fake quantization of an activation to [minimum, maximum] (nudged to include 0)."""
    # The range always holds 0 (so that zero padding and ReLU are exact), and is never empty.
    minimum = ops.minimum(ops.cast(minimum, "float32"), 0.0)
    maximum = ops.maximum(ops.maximum(ops.cast(maximum, "float32"), 0.0), minimum + 1e-6)
    return keras.quantizers.fake_quant_with_min_max_vars(x, minimum, maximum, num_bits=NUM_BITS, narrow_range=False)


def activation_scale_and_zero_point(minimum: float, maximum: float) -> tuple[float, int]:
    """The int8 (scale, zero point) `fake_quant_per_tensor` uses for [minimum, maximum].

    TensorFlow's nudging (`Nudge` in tensorflow/core/kernels/fake_quant_ops_functor.h): the
    scale spans the range over 255 steps, the zero point is rounded onto the grid, which
    shifts the range slightly so that 0.0 is exact.
    """
    minimum = min(float(minimum), 0.0)
    maximum = max(float(maximum), 0.0, minimum + 1e-6)
    scale = (maximum - minimum) / 255.0
    zero_from_min = 0.0 - minimum / scale  # on the uint8 grid [0, 255]
    zero_point = int(min(max(round_half_up(zero_from_min), 0), 255))
    return scale, zero_point - 128  # the int8 grid is the uint8 one shifted by 128


def round_half_up(v: float) -> int:
    import math

    return int(math.floor(v + 0.5))
