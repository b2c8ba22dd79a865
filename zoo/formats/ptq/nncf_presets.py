"""The `nncf.quantize` settings OpenVINO recommends for a model, read from its OpenVINO graph.

OpenVINO's post-training quantization guide ("Basic Quantization Flow", and POT's DefaultQuantization
before it): `preset=MIXED` (symmetric weights, asymmetric activations) for models with non-ReLU
activations (GELU, swish, ELU, PReLU, sigmoid gates), whose outputs are not centred on zero, where
the default PERFORMANCE preset (symmetric activations) wastes half the int8 range; and
`model_type=TRANSFORMER` for models with attention (NNCF then also picks MIXED). Everything else
stays at NNCF's defaults, which are its recommendations (300 calibration samples at most, fast bias
correction), except the overflow fix, which follows the CPUs the model is for (`OVERFLOW_FIX`).

OpenVINO's CPU plugin sums uint8 x int8 products in saturating int16 pairs on CPUs without VNNI, as
onnxruntime does (`zoo.formats.ptq.x86_int8`; OpenVINO's "Saturation (overflow) issue workaround":
"a common problem for ... optimized or efficient models"; NNCF 2.5's release notes: `quantize` "can
generate inaccurate int8 results for models with the MobileNet-like architecture on non-VNNI
machines"). NNCF's default, `OverflowFix.FIRST_LAYER`, gives 7-bit weights to the first layer only;
the default target (`any`) takes `ENABLE`, 7-bit weights in every layer that sums products over
channels (depthwise convolutions, which sum none, keep 8 bits), so that no pair can saturate and
every x86 CPU computes what the verifying one did; `vnni` takes `DISABLE`, 8-bit weights everywhere,
for CPUs that never saturate.
"""

from __future__ import annotations

import dataclasses

from zoo.formats.ptq.x86_int8 import DEFAULT_TARGET_CPU

# OpenVINO op types of activations that are not ReLU-like (ReLU, ReLU6 = Clamp(0, 6) and linear are). Exact GELU
# reaches the graph from a SavedModel as its Erf, before OpenVINO's own passes fuse it to Gelu.
NON_RELU = ("Gelu", "Erf", "Swish", "HSwish", "Elu", "PRelu", "Mish", "SoftPlus", "Sigmoid", "HSigmoid", "Selu", "Tanh")
# Products of two activations: attention's query x key and weights x value (Keras's MultiHeadAttention: Einsum).
_PRODUCTS = ("MatMul", "Einsum")
# target CPU (`x86_int8.TARGET_CPUS`) -> NNCF's `OverflowFix` (see the module docstring)
OVERFLOW_FIX = {"any": "enable", "vnni": "disable"}


@dataclasses.dataclass(frozen=True)
class NNCFSettings:
    """Keyword arguments for `nncf.quantize` and why."""

    preset: str | None  # "mixed", or None for NNCF's default (PERFORMANCE)
    transformer: bool
    reason: str
    overflow_fix: str = OVERFLOW_FIX[DEFAULT_TARGET_CPU]  # an `nncf.OverflowFix` value

    def kwargs(self, accuracy_control: bool = False) -> dict:
        """For `nncf.quantize`, or `nncf.quantize_with_accuracy_control` (which names the advanced parameters
        otherwise)."""
        import nncf
        from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix

        advanced = AdvancedQuantizationParameters(overflow_fix=OverflowFix(self.overflow_fix))
        out = {"advanced_quantization_parameters" if accuracy_control else "advanced_parameters": advanced}
        if self.preset == "mixed":
            out["preset"] = nncf.QuantizationPreset.MIXED
        if self.transformer:
            out["model_type"] = nncf.ModelType.TRANSFORMER
        return out

    def describe(self) -> str:
        bits = {"enable": "7-bit weights in every layer", "disable": "8-bit weights"}[self.overflow_fix]
        return f"{self.reason}, overflow fix {self.overflow_fix} ({bits})"


def recommended(model, target_cpu: str = DEFAULT_TARGET_CPU) -> NNCFSettings:
    """The settings for an `openvino.Model` made for `target_cpu` (`x86_int8.TARGET_CPUS`)."""
    return dataclasses.replace(_for_graph(model), overflow_fix=OVERFLOW_FIX[target_cpu])


def _for_graph(model) -> NNCFSettings:
    ops = list(model.get_ops())
    non_relu = sorted({op.get_type_name() for op in ops} & set(NON_RELU))
    attention = any(op.get_type_name() in _PRODUCTS and op.get_input_size() >= 2
                    and not any(constant(op.input_value(i).get_node()) for i in range(op.get_input_size()))
                    for op in ops)
    if attention:
        return NNCFSettings("mixed", True, "transformer model type (a product of two activations: attention)")
    if non_relu:
        return NNCFSettings("mixed", False, f"mixed preset (asymmetric activations) for {', '.join(non_relu)}")
    return NNCFSettings(None, False, "performance preset (ReLU activations)")


def constant(node, depth: int = 3) -> bool:
    """Whether `node` is a constant, possibly behind conversions (a float16 weight's Convert)."""
    if node.get_type_name() == "Constant":
        return True
    if depth and node.get_type_name() in ("Convert", "Reshape", "Transpose") and node.get_input_size():
        return constant(node.input_value(0).get_node(), depth - 1)
    return False
