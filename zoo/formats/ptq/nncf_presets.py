"""The `nncf.quantize` settings OpenVINO recommends for a model, read from its OpenVINO graph.

OpenVINO's post-training quantization guide ("Basic Quantization Flow", and POT's DefaultQuantization
before it): `preset=MIXED` (symmetric weights, asymmetric activations) for models with non-ReLU
activations (GELU, swish, ELU, PReLU, sigmoid gates), whose outputs are not centred on zero, where
the default PERFORMANCE preset (symmetric activations) wastes half the int8 range; and
`model_type=TRANSFORMER` for models with attention (NNCF then also picks MIXED). Everything else
stays at NNCF's defaults, which are its recommendations: 300 calibration samples at most, fast bias
correction, and `OverflowFix.FIRST_LAYER` (7-bit weights in the first layers, against the `vpmaddubsw`
saturation of CPUs without VNNI that `zoo.formats.ptq.x86_int8` describes).
"""

from __future__ import annotations

import dataclasses

# OpenVINO op types of activations that are not ReLU-like (ReLU, ReLU6 = Clamp(0, 6) and linear are). Exact GELU
# reaches the graph from a SavedModel as its Erf, before OpenVINO's own passes fuse it to Gelu.
NON_RELU = ("Gelu", "Erf", "Swish", "HSwish", "Elu", "PRelu", "Mish", "SoftPlus", "Sigmoid", "HSigmoid", "Selu", "Tanh")
# Products of two activations: attention's query x key and weights x value (Keras's MultiHeadAttention: Einsum).
_PRODUCTS = ("MatMul", "Einsum")


@dataclasses.dataclass(frozen=True)
class NNCFSettings:
    """Keyword arguments for `nncf.quantize` and why."""

    preset: str | None  # "mixed", or None for NNCF's default (PERFORMANCE)
    transformer: bool
    reason: str

    def kwargs(self) -> dict:
        import nncf

        out = {}
        if self.preset == "mixed":
            out["preset"] = nncf.QuantizationPreset.MIXED
        if self.transformer:
            out["model_type"] = nncf.ModelType.TRANSFORMER
        return out


def recommended(model) -> NNCFSettings:
    """The settings for an `openvino.Model`."""
    ops = list(model.get_ops())
    non_relu = sorted({op.get_type_name() for op in ops} & set(NON_RELU))
    attention = any(op.get_type_name() in _PRODUCTS and op.get_input_size() >= 2
                    and not any(_constant(op.input_value(i).get_node()) for i in range(op.get_input_size()))
                    for op in ops)
    if attention:
        return NNCFSettings("mixed", True, "transformer model type (a product of two activations: attention)")
    if non_relu:
        return NNCFSettings("mixed", False, f"mixed preset (asymmetric activations) for {', '.join(non_relu)}")
    return NNCFSettings(None, False, "performance preset (ReLU activations)")


def _constant(node, depth: int = 3) -> bool:
    """Whether `node` is a constant, possibly behind conversions (a float16 weight's Convert)."""
    if node.get_type_name() == "Constant":
        return True
    if depth and node.get_type_name() in ("Convert", "Reshape", "Transpose") and node.get_input_size():
        return _constant(node.input_value(0).get_node(), depth - 1)
    return False
