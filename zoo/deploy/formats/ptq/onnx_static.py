"""ONNX float16, and static int8 in QDQ form, with onnxruntime's own tools.

- `to_float16`: onnxruntime's `convert_float_to_float16`, float32 inputs and outputs kept.
- `quantize_int8`: `onnxruntime.quantization.quantize_static`, QDQ format, calibrated on
  representative inputs (min/max), weights int8 symmetric per channel, activations uint8
  asymmetric per tensor (onnxruntime's x86 kernels are u8s8: its `quantize_static` docstring,
  "Choosing parameters for CPU inference"). The weights' range is the `Int8Scheme` of the CPUs
  the model is for (`SCHEMES`): 7 bits by default, so that the u8s8 pairs of x86 CPUs
  without VNNI cannot saturate and every x86 CPU computes the same (`zoo.deploy.formats.ptq.x86_int8`);
  8 bits for VNNI (and ARM) only. Where 7-bit weights lose decisions (fewer than 99% of the
  test inputs' argmax kept), `quantize_int8_kept` also tries uint8 weights (onnxruntime's
  U8U8 kernels, exact on every CPU too, slower) and keeps the better. `exclude` keeps nodes in float (`nodes_to_exclude`; the
  accuracy-budgeted search), `only` quantizes just those (`nodes_to_quantize`; per-layer
  sensitivity).
- `quantize_learned`: the int8 QDQ model of a quantization-aware model. tf2onnx turns its
  activation fake-quant ops into QuantizeLinear/DequantizeLinear pairs (its
  `FakeQuantWithMinMaxVars` handler) and folds the weight ones into on-grid constants; the pairs
  are lifted out as `TensorQuantOverrides` and `quantize_static` writes the QDQ model with the
  learned ranges (the per-channel weight scales it computes, max|w|/127, are the ones training
  used, so the weights requantize exactly).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from zoo.deploy.formats.ptq.x86_int8 import DEFAULT_TARGET_CPU

# One example per calibration run. MinMax ranges are the same whatever the batch, but onnxruntime's
# calibration session (every tensor reduced to extra outputs, graph optimizations off) grows by about
# 250 MB per example in a batch: ConvNeXtTiny at 32x32, 100 examples, peak RSS 1.0 GB in batches of 1,
# 2.5 GB of 4, 4.6 GB of 8, over 8 GB of 32 (18.7 GB and OOM-killed in the compatibility matrix), in
# the same time (59-64 s).
CALIBRATION_BATCH = 1
# Ops whose output keeps the input's quantization range (onnxruntime quantizes their output, not their input).
SAME_RANGE = ("Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity", "MaxPool")


@dataclasses.dataclass(frozen=True)
class Int8Scheme:
    """How `quantize_static` lays out a static int8 model: types, ranges, calibration."""

    name: str
    description: str
    weight_type: str = "int8"  # or "uint8": onnxruntime's exact but slower U8U8 kernels on x86
    activation_type: str = "uint8"  # or "int8" (x86 shifts it to uint8)
    reduce_range: bool = False  # weights in [-64, 64]: u8s8 pairs cannot leave int16 (`x86_int8.SAFE_WEIGHT`)
    per_channel: bool = True
    symmetric_activations: bool = False
    calibration: str = "minmax"  # or "percentile", "entropy" (onnxruntime's CalibrationMethod)

    def quantize_static_args(self) -> dict:
        from onnxruntime.quantization import CalibrationMethod, QuantType

        types = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}
        methods = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
                   "entropy": CalibrationMethod.Entropy}
        extra = {"ActivationSymmetric": True} if self.symmetric_activations else {}
        return {"weight_type": types[self.weight_type], "activation_type": types[self.activation_type],
                "reduce_range": self.reduce_range, "per_channel": self.per_channel,
                "calibrate_method": methods[self.calibration], "extra_options": extra}


# The scheme for each target CPU (`x86_int8.TARGET_CPUS`). "any": as fast as 8-bit weights (the same u8s8 kernels)
# and exact on every CPU; uint8 weights (the U8U8 kernels, Optimum's AVX2 setting) are exact too but slower, widening
# to 16 bits where u8s8 uses VNNI. Both kernel paths per model: benchmarks/results/int8_cpus.md.
SCHEMES = {
    "any": Int8Scheme("any", "7-bit weights: the same int8 results on every x86 CPU (AVX2, AVX-512, VNNI) and ARM",
                      reduce_range=True),
    "vnni": Int8Scheme("vnni", "8-bit weights: for x86 CPUs with VNNI (AVX-512 VNNI, AVX-VNNI, AMX) and ARM; "
                       "saturates on AVX2 and AVX-512 without VNNI"),
}
# uint8 weights: onnxruntime's U8U8 kernels, exact on every x86 CPU (no pair to saturate) with 8-bit weights, but
# slower than u8s8 (they widen to 16 bits, and skip VNNI). Measured against 7-bit weights and TFLite's int8 on the
# compatibility matrix's models: results/compat/int8_schemes.md.
U8U8 = Int8Scheme("u8u8", "uint8 weights (U8U8 kernels): the same int8 results on every x86 CPU, slower kernels",
                  weight_type="uint8")
# target CPU -> the scheme also tried where its own int8 agrees with float on fewer than `fallback.BELOW` of the
# test inputs' decisions (the export's int8 criterion, `zoo.deploy.export.verify`); the better of the two is kept.
FALLBACKS = {"any": U8U8}


class _Batches:
    """onnxruntime's `CalibrationDataReader` over the model's inputs: an array (one input) or a dict of
    arrays by input name (`zoo.deploy.formats.inputs`)."""

    def __init__(self, names: list[str], x, batch: int = CALIBRATION_BATCH):
        if not isinstance(x, dict):
            if len(names) != 1:
                raise ValueError(f"The ONNX model takes inputs {names}; calibration data must name them.")
            x = {names[0]: x}
        elif len(x) == 1 and len(names) == 1:
            x = {names[0]: next(iter(x.values()))}
        missing = sorted(set(names) - set(x))
        if missing:
            raise ValueError(f"Calibration data lacks ONNX input(s) {missing}; it has {sorted(x)}.")
        count = len(next(iter(x.values())))
        self._items = iter([{n: _contiguous(x[n][i : i + batch]) for n in names} for i in range(0, count, batch)])

    def get_next(self):
        return next(self._items, None)


def _contiguous(a) -> np.ndarray:
    a = np.asarray(a)
    return np.ascontiguousarray(a, dtype=np.float32 if a.dtype.kind == "f" else a.dtype)


def input_names(model_path) -> list[str]:
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def to_float16(float_path, out_path) -> Path:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = convert_float_to_float16(onnx.load(str(float_path)), keep_io_types=True)
    onnx.save(model, str(out_path))
    return Path(out_path)


def preprocess(float_path, out_path) -> Path:
    """onnxruntime's `quant_pre_process` (shape inference, graph optimization), as its docs advise before quantizing."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    quant_pre_process(str(float_path), str(out_path), skip_symbolic_shape=True)
    return Path(out_path)


def quantizable_nodes(model_path) -> list[str]:
    """Names of the nodes with weights that static int8 quantizes (Conv, MatMul, Gemm), in graph order."""
    import onnx

    model = onnx.load(str(model_path))
    initializers = {i.name for i in model.graph.initializer}
    return [n.name for n in model.graph.node
            if n.op_type in ("Conv", "MatMul", "Gemm") and any(i in initializers for i in n.input[1:2])]


def quantize_int8(prepared_path, out_path, calibration_x, *, exclude=(), only=None, overrides=None,
                  calibration_cache=None, scheme: Int8Scheme | str = DEFAULT_TARGET_CPU) -> Path:
    """Static int8 QDQ model of `prepared_path` (see `preprocess`), written to `out_path`.

    `calibration_cache`: a JSON path where onnxruntime keeps the calibrated ranges, so a search
    that quantizes the same model many times calibrates once. `scheme`: an `Int8Scheme` or the
    name of a target CPU (`SCHEMES`).
    """
    from onnxruntime.quantization import QuantFormat, quantize_static

    scheme = SCHEMES[scheme] if isinstance(scheme, str) else scheme
    args = scheme.quantize_static_args()
    if overrides:
        args["extra_options"] = {**args["extra_options"], "TensorQuantOverrides": overrides}
    kwargs = {"calibration_cache_path": str(calibration_cache)} if calibration_cache else {}
    quantize_static(
        str(prepared_path), str(out_path), _Batches(input_names(prepared_path), calibration_x),
        quant_format=QuantFormat.QDQ, nodes_to_exclude=list(exclude),
        nodes_to_quantize=list(only) if only is not None else None, **args, **kwargs,
    )
    return Path(out_path)


def agreement(float_path, int8_path, x) -> tuple[float, float] | None:
    """(argmax agreement, mean abs difference) of the int8 model's first output against the float model's on
    inputs `x`; None where that output has no class axis."""
    import onnxruntime as ort

    outputs = []
    for path in (float_path, int8_path):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        batches = _Batches([i.name for i in session.get_inputs()], x, batch=256)
        outputs.append(np.concatenate([session.run(None, b)[0] for b in iter(batches.get_next, None)]))
    if outputs[0].ndim < 2 or outputs[0].shape[-1] < 2:
        return None
    return (float(np.mean(np.argmax(outputs[0], -1) == np.argmax(outputs[1], -1))),
            float(np.mean(np.abs(outputs[0] - outputs[1]))))


def quantize_int8_kept(prepared_path, out_path, calibration_x, work_dir, target_cpu: str = DEFAULT_TARGET_CPU,
                       check_x=None, check_name: str = "calibration") -> tuple[Path, str]:
    """`quantize_int8` with the target CPU's scheme, and where its int8 agrees with float on fewer than
    `fallback.BELOW` of the inputs `check_x` (default the calibration inputs, whose ranges int8 was fit to and
    which so flatter it: the export passes its test inputs), with its fallback scheme too (`FALLBACKS`),
    keeping the one that agrees more (`fallback.keep_better`); on a tie (a hundred inputs resolve agreement to a
    point), the fallback, whose 8-bit weights agreed more on a thousand images where 7-bit ones missed
    (results/compat/int8_schemes.md; the outputs' mean abs difference did not tell them apart). Returns (path, a
    note saying which and why)."""
    import shutil

    from zoo.deploy.formats.ptq.fallback import keep_better

    def option(scheme, path):
        return scheme.description.split(":")[0], lambda: quantize_int8(prepared_path, path, calibration_x, scheme=scheme)

    other = FALLBACKS.get(target_cpu)
    check_x = calibration_x if check_x is None else check_x
    count = len(next(iter(check_x.values()))) if isinstance(check_x, dict) else len(check_x)
    kept, _, note = keep_better(option(SCHEMES[target_cpu], out_path),
                                other and option(other, Path(work_dir) / f"int8_{other.name}.onnx"),
                                lambda path: agreement(prepared_path, path, check_x), f"{count} {check_name}",
                                tie_keeps_fallback=True)
    if Path(kept) != Path(out_path):
        shutil.copyfile(kept, out_path)
    return Path(out_path), note


def lift_fake_quant(model):
    """(float model, overrides): the QuantizeLinear -> DequantizeLinear pairs on activations removed, their
    scale and zero point returned as `TensorQuantOverrides` keyed by the tensor they quantized."""
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:  # tf2onnx may emit the scale and zero point as Constant nodes
        if node.op_type == "Constant":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    producers = {o: n for n in graph.node for o in n.output}
    overrides, rename, dropped = {}, {}, set()
    for dq in graph.node:
        if dq.op_type != "DequantizeLinear":
            continue
        q = producers.get(dq.input[0])
        if q is None or q.op_type != "QuantizeLinear":
            continue
        source = q.input[0]
        scale = float(np.asarray(consts[q.input[1]]).reshape(()))
        zero = np.asarray(consts[q.input[2]]).reshape(())
        overrides[source] = [{"scale": np.array(scale, np.float32), "zero_point": np.array(zero, zero.dtype)}]
        rename[dq.output[0]] = source
        dropped.update((q.name, dq.name))
    kept = [n for n in graph.node if n.name not in dropped]
    for node in kept:
        for i, name in enumerate(node.input):
            node.input[i] = _follow(rename, name)
    for node in kept:  # in graph order: a layout op's output has its input's range (NHWC->NCHW reshapes, pooling)
        if node.op_type in SAME_RANGE and node.input and node.input[0] in overrides:
            for output in node.output:
                overrides.setdefault(output, overrides[node.input[0]])
    for output in graph.output:
        if output.name in rename:  # the model output itself was fake-quantized: keep its name
            source = _follow(rename, output.name)
            kept.append(onnx.helper.make_node("Identity", [source], [output.name], name=f"{output.name}_identity"))
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in kept for name in node.input}
    unused = [i for i in graph.initializer if i.name not in used and i.name not in {o.name for o in graph.output}]
    for initializer in unused:  # the lifted pairs' scales and zero points
        graph.initializer.remove(initializer)
    return model, overrides


def _follow(rename: dict, name: str) -> str:
    while name in rename:
        name = rename[name]
    return name


def quantize_learned(fake_quant_onnx: Path, out_path, work_dir, calibration_x,
                     scheme: Int8Scheme | str = DEFAULT_TARGET_CPU) -> Path:
    """The int8 QDQ model of a quantization-aware model's ONNX graph, with its learned activation ranges.

    Tensors without a learned range (a softmax output) are calibrated on `calibration_x`.
    """
    import onnx

    float_model, overrides = lift_fake_quant(onnx.load(str(fake_quant_onnx)))
    work_dir = Path(work_dir)
    lifted = work_dir / "qat_float.onnx"
    onnx.save(float_model, str(lifted))
    # No graph optimization before quantizing: it could rename the tensors the overrides name.
    return quantize_int8(lifted, out_path, calibration_x, overrides=overrides, scheme=scheme)


def size_bytes(path) -> int:
    return os.path.getsize(path)
