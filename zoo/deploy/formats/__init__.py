"""The table of export formats. It alone drives export, option validation, the report and the docs.

Adding a format is one row in `FORMATS` plus one module in this package with
the interface of `zoo.deploy.formats.base` (`convert(job)` and `load(path, job)`).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

from zoo.errors import UnknownNameError, ZooError


class OptionError(ZooError, ValueError):
    """An export option that the requested formats do not take, or a bad value for one."""


@dataclasses.dataclass(frozen=True)
class Option:
    """A format option: its allowed values (or a check) and its default."""

    name: str
    help: str
    default: Any = None
    choices: tuple | None = None
    multiple: bool = False  # takes a list of choices, one artifact each
    check: Callable[[Any], bool] | None = None
    expects: str = ""  # for the error message when `check` fails

    def normalize(self, value, fmt: str):
        values = _as_tuple(value) if self.multiple else (value,)
        if self.multiple and not values:
            raise OptionError(f"{fmt} option {self.name!r} needs at least one value. Allowed: {', '.join(self.choices)}.")
        for v in values:
            if self.choices is not None and v not in self.choices:
                raise UnknownNameError(f"{fmt} {self.name}", str(v), self.choices)
            if self.check is not None and not self.check(v):
                raise OptionError(f"{fmt} option {self.name} expects {self.expects}. Received: {self.name}={v!r}")
        return tuple(dict.fromkeys(values)) if self.multiple else value


@dataclasses.dataclass(frozen=True)
class Format:
    """One export format: where its code lives, what it writes and how it is verified."""

    name: str
    module: str
    suffix: str  # "" for a directory artifact
    artifact: str  # path under the output directory; {model} and {variant} are filled in
    runtime: str  # what verification runs the artifact in
    options: tuple[Option, ...]
    variant_option: str | None = None  # the option whose values are separate artifacts
    precision: Callable[[Any], str] = lambda variant: "float32"  # variant -> tolerance class
    description: str = ""

    def impl(self):
        """The format's module: `convert(job)` and `load(path, job)`."""
        return importlib.import_module(self.module)

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)


# The check of every option that takes a count or a number >= 1.
POSITIVE_INT = {"check": lambda v: isinstance(v, int) and v >= 1,
                "expects": "a positive integer"}
TFLITE_PRECISIONS = ("float32", "float16", "dynamic_int8", "int8")
TFJS_WEIGHTS = ("float32", "float16", "uint16", "uint8")
ONNX_OPSETS = range(13, 19)  # tf2onnx 1.17 emits up to 18; onnxruntime 1.31 runs all of them
DEFAULT_ONNX_OPSET = 18
SEQUENCE_LENGTH = Option("sequence_length", "static time axis of the unrolled RNN route (default: the data's)",
                         **POSITIVE_INT)

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            name="saved_model",
            module="zoo.deploy.formats.saved_model",
            artifact="saved_model",
            suffix="",
            runtime="TensorFlow (tf.saved_model.load, serving_default)",
            description="TF Serving layout <serving_dir>/<name>/<version>, named `serving_default` signature",
            options=(
                Option("serving_dir", "TF Serving base directory (default <out>/saved_model)",
                       check=lambda v: isinstance(v, (str, bytes)) or hasattr(v, "__fspath__"), expects="a path"),
                Option("version", "explicit version number (default: next free)", **POSITIVE_INT),
                Option("keep", "keep only the newest N versions", **POSITIVE_INT),
            ),
        ),
        Format(
            name="tflite",
            module="zoo.deploy.formats.tflite",
            artifact="{model}_{variant}.tflite",
            suffix=".tflite",
            runtime="ai_edge_litert Interpreter (XNNPACK)",
            description="LiteRT flatbuffer, builtin ops only; RNNs via a fixed-batch signature or an unrolled rebuild",
            variant_option="quantization",
            precision=lambda v: {"float32": "float32", "float16": "float16"}.get(v, "int8"),
            options=(
                Option("quantization", "precisions, one .tflite each", default=("float32",), choices=TFLITE_PRECISIONS,
                       multiple=True),
                Option("int8_io", "full int8: int8 input and output tensors too", default=False,
                       check=lambda v: isinstance(v, bool), expects="true or false"),
                Option("representative_data", "calibration inputs for full int8 (array or tf.data of x or (x, y))"),
                Option("calibration_samples", "how many representative inputs to calibrate on", default=200,
                       **POSITIVE_INT),
                SEQUENCE_LENGTH,
            ),
        ),
        Format(
            name="tfjs",
            module="zoo.deploy.formats.tfjs",
            artifact="tfjs_{variant}",
            suffix="",
            runtime="@tensorflow/tfjs in Node (wasm backend, cpu fallback; files from disk)",
            description="TF.js graph model converted from the SavedModel; RNNs via control flow v2 or an unrolled "
                        "rebuild",
            variant_option="weight_quantization",
            precision=lambda v: {"float32": "float32", "float16": "float16", "uint16": "float16"}.get(v, "int8"),
            options=(
                Option("weight_quantization", "weight storage: float32 (none), float16, uint16 or uint8",
                       default=("float32",), choices=TFJS_WEIGHTS, multiple=True),
                SEQUENCE_LENGTH,
            ),
        ),
        Format(
            name="onnx",
            module="zoo.deploy.formats.onnx",
            artifact="{model}.onnx",
            suffix=".onnx",
            runtime="onnxruntime (CPUExecutionProvider)",
            description="ONNX via tf2onnx with a dynamic batch axis",
            options=(
                Option("opset", f"ONNX opset, {ONNX_OPSETS.start}-{ONNX_OPSETS.stop - 1}", default=DEFAULT_ONNX_OPSET,
                       check=lambda v: isinstance(v, int) and v in ONNX_OPSETS,
                       expects=f"an integer from {ONNX_OPSETS.start} to {ONNX_OPSETS.stop - 1}"),
            ),
        ),
    )
}

DEFAULT_FORMATS = tuple(FORMATS)


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownNameError("export format", name, FORMATS) from None


def parse_formats(formats) -> tuple[Format, ...]:
    """Formats from names or a comma-separated string, unknown names with suggestions."""
    names = [n.strip() for n in (formats.split(",") if isinstance(formats, str) else formats) if n and n.strip()]
    if not names:
        raise OptionError(f"No export format given. Available: {', '.join(FORMATS)}.")
    return tuple(get_format(n) for n in dict.fromkeys(names))


def resolve_options(formats: tuple[Format, ...], options: dict) -> dict[str, dict]:
    """Per-format options: `options` (name -> value; None means unset) spread over the formats taking them.

    A name that no requested format takes is rejected, saying which formats do take it.
    """
    options = {k: v for k, v in options.items() if v is not None}
    for name in options:
        if not any(f.option(name) for f in formats):
            takers = [f.name for f in FORMATS.values() if f.option(name)]
            requested = ", ".join(f.name for f in formats)
            if takers:
                raise OptionError(
                    f"Option {name!r} is not taken by the requested format(s) ({requested}); "
                    f"only {', '.join(takers)} take(s) it."
                )
            known = sorted({o.name for f in FORMATS.values() for o in f.options})
            raise UnknownNameError("export option", name, known)
    resolved = {}
    for f in formats:
        resolved[f.name] = {
            o.name: o.normalize(options[o.name], f.name) if o.name in options else o.default for o in f.options
        }
    return resolved


def _as_tuple(value) -> tuple:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(value)


def markdown_table() -> str:
    """The formats table for the docs (README's export section is generated from this)."""
    rows = ["| format | artifact | options | verified in |", "|---|---|---|---|"]
    for f in FORMATS.values():
        opts = "; ".join(
            f"`{o.name}`" + (f" ({', '.join(map(str, o.choices))})" if o.choices else "") for o in f.options
        )
        rows.append(f"| `{f.name}` | `{f.artifact}`: {f.description} | {opts} | {f.runtime} |")
    return "\n".join(rows)
