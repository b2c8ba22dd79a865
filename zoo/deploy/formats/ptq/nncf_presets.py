"""The `nncf.quantize` settings for a model: the preset OpenVINO recommends for its graph, and the calibration.

OpenVINO's post-training quantization guide ("Basic Quantization Flow", and POT's DefaultQuantization
before it): `preset=MIXED` (symmetric weights, asymmetric activations) for models with non-ReLU
activations (GELU, swish, ELU, PReLU, sigmoid gates), whose outputs are not centred on zero, where
the default PERFORMANCE preset (symmetric activations) wastes half the int8 range; and
`model_type=TRANSFORMER` for models with attention (NNCF then also picks MIXED). Everything else
stays at NNCF's defaults (300 calibration samples at most), except the overflow fix, which follows the
CPUs the model is for (`OVERFLOW_FIX`), and, for models that are not transformers, the two calibration
settings of `CALIBRATION`:

- activation ranges from the global minimum and maximum over the calibration samples
  (`RangeEstimatorParametersSet.MINMAX`, as TFLite's converter and onnxruntime's MinMax calibrator take
  them) instead of NNCF's default for per-tensor activations, the mean over the samples of each one's
  extremes (`MEAN_MINMAX`), which clips the activations of every sample that reaches further than the
  average one;
- `fast_bias_correction=False`: NNCF's `BiasCorrection`, which corrects each layer's bias for the shift
  that quantizing it and the layers before it caused, instead of `FastBiasCorrection`, which measures
  each layer alone ("a different bias correction method which is more accurate, in general, and takes
  more time", `nncf.quantize`'s docstring).

Both are parameters `nncf.quantize` exposes for accuracy (`advanced_parameters.activations_range_estimator_params`,
`fast_bias_correction`). Full bias correction costs calibration time (each layer's subgraph runs on the
calibration samples), and NNCF 2.5's release notes warn that it "can hang on models with transformer
architecture"; global extremes also suit the outlier channels of attention's activations badly: transformers
keep NNCF's defaults (`NNCF_CALIBRATION`). Full bias correction can also cost a model many decisions (a
VGG19 whose decisions are right by tiny margins: results/compat/vgg19_openvino_bias_correction.json), so
the export makes fast bias correction too where full keeps fewer than 99% of them on its test inputs, and
keeps the better (`zoo.deploy.formats.ptq.openvino_nncf`, `zoo.deploy.formats.ptq.fallback`).

What these choices did on the compatibility matrix's MobileNets: results/compat/int8_schemes_openvino.md
(`benchmarks/int8_schemes.py --openvino`).

OpenVINO's CPU plugin sums uint8 x int8 products in saturating int16 pairs on CPUs without VNNI, as
onnxruntime does (`zoo.deploy.formats.ptq.x86_int8`; OpenVINO's "Saturation (overflow) issue workaround":
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

from zoo.deploy.formats.ptq.x86_int8 import DEFAULT_TARGET_CPU

# OpenVINO op types of activations that are not ReLU-like (ReLU, ReLU6 = Clamp(0, 6) and linear are). Exact GELU
# reaches the graph from a SavedModel as its Erf, before OpenVINO's own passes fuse it to Gelu.
NON_RELU = ("Gelu", "Erf", "Swish", "HSwish", "Elu", "PRelu", "Mish", "SoftPlus", "Sigmoid", "HSigmoid", "Selu", "Tanh")
# Products of two activations: attention's query x key and weights x value (Keras's MultiHeadAttention: Einsum).
_PRODUCTS = ("MatMul", "Einsum")
# target CPU (`x86_int8.TARGET_CPUS`) -> NNCF's `OverflowFix` (see the module docstring)
OVERFLOW_FIX = {"any": "enable", "vnni": "disable"}
# Calibration settings for models that are not transformers (see the module docstring): the activations' range
# estimator (an `nncf.quantization.range_estimator.RangeEstimatorParametersSet` name; None: NNCF's default) and
# `nncf.quantize`'s `fast_bias_correction`.
CALIBRATION = {"activations_range": "MINMAX", "fast_bias_correction": False}
# What NNCF does where zoo changes nothing: transformers' calibration.
NNCF_CALIBRATION = {"activations_range": None, "fast_bias_correction": True}


@dataclasses.dataclass(frozen=True)
class NNCFSettings:
    """Keyword arguments for `nncf.quantize` and why."""

    preset: str | None  # "mixed", or None for NNCF's default (PERFORMANCE)
    transformer: bool
    reason: str
    overflow_fix: str = OVERFLOW_FIX[DEFAULT_TARGET_CPU]  # an `nncf.OverflowFix` value
    activations_range: str | None = CALIBRATION["activations_range"]  # see `CALIBRATION`
    fast_bias_correction: bool = CALIBRATION["fast_bias_correction"]

    def kwargs(self, accuracy_control: bool = False) -> dict:
        """For `nncf.quantize`, or `nncf.quantize_with_accuracy_control` (which names the advanced parameters
        otherwise)."""
        import nncf
        from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix
        from nncf.quantization.range_estimator import RangeEstimatorParametersSet

        advanced = AdvancedQuantizationParameters(overflow_fix=OverflowFix(self.overflow_fix))
        if self.activations_range:
            advanced.activations_range_estimator_params = getattr(RangeEstimatorParametersSet, self.activations_range)
        out = {"advanced_quantization_parameters" if accuracy_control else "advanced_parameters": advanced}
        if self.preset == "mixed":
            out["preset"] = nncf.QuantizationPreset.MIXED
        if self.transformer:
            out["model_type"] = nncf.ModelType.TRANSFORMER
        if not self.fast_bias_correction:
            out["fast_bias_correction"] = False
        return out

    def describe(self) -> str:
        bits = {"enable": "7-bit weights in every layer", "disable": "8-bit weights",
                "first_layer_only": "7-bit weights in the first layer"}[self.overflow_fix]
        calibration = [f"{(self.activations_range or 'mean_minmax').lower()} activation ranges",
                       "fast bias correction" if self.fast_bias_correction else "full bias correction"]
        return f"{self.reason}, overflow fix {self.overflow_fix} ({bits}), {', '.join(calibration)}"


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
        return NNCFSettings("mixed", True, "transformer model type (a product of two activations: attention)",
                            **NNCF_CALIBRATION)
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
