"""The better of a quantizer's int8 and its fallback, judged on the export's own test inputs.

A calibration setting that keeps more decisions on most models can lose many on another, so each runtime's
default int8 has a fallback setting, made only where the default keeps fewer than `BELOW` of float's
decisions (the export's int8 criterion, `zoo.deploy.export.verify`), the one that keeps more being the artifact:

- ONNX: 7-bit weights, falling back to uint8 weights (`onnx_static.quantize_int8_kept`);
- OpenVINO: NNCF's full `BiasCorrection`, falling back to its `FastBiasCorrection` (`nncf_presets`;
  results/compat/vgg19_openvino_bias_correction.json).
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")

BELOW = 0.99  # the export's int8 criterion: argmax agreement with float on the test inputs (zoo.deploy.export.verify)


def keep_better(first: tuple[str, Callable[[], T]], fallback: tuple[str, Callable[[], T]] | None,
                agreement: Callable[[T], tuple[float, float] | None], inputs: str, *,
                tie_keeps_fallback: bool) -> tuple[T, str, str]:
    """(int8 model, the name of the setting kept, a note saying which and why).

    `first` and `fallback` are (name, make): `make()` quantizes with that setting and returns the int8
    model (a path, or a model in memory). `agreement(model)` is (argmax agreement with float, mean abs
    difference) on the check inputs that `inputs` names ("1000 test"), or None where the outputs hold no
    decisions (fewer than two classes): then, or without a fallback, the first setting is kept unmeasured.
    A tie keeps the fallback where `tie_keeps_fallback`, else the first."""
    name, make = first
    model = make()
    if fallback is None:
        return model, name, name
    measured = agreement(model)
    if measured is None or measured[0] >= BELOW:
        return model, name, name
    other_name, make_other = fallback
    other = make_other()
    other_measured = agreement(other)
    text = (f"on the {inputs} inputs, int8 agreed with float on {measured[0]:.1%} (mean abs diff {measured[1]:.2g}) "
            f"with {name} and {other_measured[0]:.1%} ({other_measured[1]:.2g}) with {other_name}")
    if other_measured[0] > measured[0] or (tie_keeps_fallback and other_measured[0] == measured[0]):
        return other, other_name, f"{other_name}, kept: {text}"
    return model, name, f"{name}, kept: {text}"
