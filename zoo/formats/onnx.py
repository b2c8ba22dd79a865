"""ONNX via tf2onnx from the export's SavedModel, with a dynamic batch axis named "batch", run with
onnxruntime: float32, float16 and int8.

`zoo.formats.onnx_convert` says why from the SavedModel (tf2onnx's `from_function` turns a
`Normalization` layer's constants into graph inputs) and what it rewrites. float16 and int8 are made
from the float32 graph by onnxruntime's own tools (`zoo.formats.ptq.onnx_static`): float16 weights and
compute with float32 inputs and outputs; int8 as a static QDQ model calibrated on the representative
data (uint8 activations per tensor, int8 weights per channel), which onnxruntime's CPU provider runs
with its int8 kernels. A quantization-aware model's int8 uses the ranges it learned. With
`max_accuracy_drop` or `min_agreement`, the most sensitive layers stay float (`nodes_to_exclude`;
`zoo.formats.ptq.budget`).
"""

from __future__ import annotations

import os
import re

import numpy as np

from zoo.core.options import Option, int_range
from zoo.formats.base import (DEFAULT_THREADS, INT8_GUARDS, INT8_OPTIONS, PRECISION, Converted, Format, Job,
                                     Runner, atomic_output, predict_in_chunks)
from zoo.formats.ptq.budget import Goal

PRECISIONS = {"float32": "float32", "float16": "float16", "int8": "int8"}

# tf2onnx 1.17 emits opsets up to 18; onnxruntime 1.31 runs all of them.
FORMAT = Format(
    name="onnx",
    artifact="{model}_{variant}.onnx",
    runtime="onnxruntime (CPUExecutionProvider)",
    description="ONNX via tf2onnx from the SavedModel (constants frozen, Erfc rewritten), dynamic batch axis; "
                "float16 and static int8 (QDQ) by onnxruntime's tools",
    variant_option="precision",
    precisions=PRECISIONS,
    options=(
        PRECISION,
        Option("opset", "ONNX opset", default=18, check=int_range(13, 18)),
        *INT8_OPTIONS,
    ),
)


def _float_proto(job: Job):
    """(the model as float ONNX, its `onnx_convert.Rewrites`); a quantization-aware model's keeps its
    fake quantization as QDQ pairs."""
    from zoo.formats.onnx_convert import convert_saved_model

    opset = job.target.options["opset"]
    proto, rewrites = convert_saved_model(job.saved_model(), opset, job.layers)
    for value in [*proto.graph.input, *proto.graph.output]:  # tf2onnx names the free axes unk__N
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = "batch"
    return proto, rewrites


def unsupported_ops(traced) -> list:
    """The graph's ops tf2onnx has no handler for at the opset (`onnx_convert.unsupported_tf_ops`)."""
    from zoo.formats.onnx_convert import unsupported_tf_ops

    return unsupported_tf_ops(traced.graph_def, traced.options.get("opset") or FORMAT.option("opset").default)


def convert(job: Job) -> Converted:
    from zoo.formats.ptq import onnx_static
    precision, options = job.target.variant, job.target.options
    notes, details = [f"opset {options['opset']}"], {}
    proto, rewrites = _float_proto(job)
    notes += rewrites.notes
    if precision == "float32":
        with atomic_output(job.target.path) as tmp:
            tmp.write_bytes(proto.SerializeToString())
        return Converted(job.target.path, notes=notes)
    scratch = os.path.join(job.work_dir, f"onnx_{precision}_{os.getpid()}")
    os.makedirs(scratch, exist_ok=True)
    float_path = os.path.join(scratch, "float32.onnx")
    with open(float_path, "wb") as f:
        f.write(proto.SerializeToString())
    with atomic_output(job.target.path) as tmp:
        if precision == "float16":
            onnx_static.to_float16(float_path, tmp)
        elif job.quantization_aware:
            onnx_static.quantize_learned(float_path, tmp, scratch, _calibration(job))
            notes.append("int8 ranges learned in quantization-aware training")
        elif any(options.get(g) is not None for g in INT8_GUARDS):
            details = _budgeted(job, float_path, scratch, tmp)
            notes.append(f"{Goal.of(options).describe()}: {details['summary']}")
        else:
            prepared = onnx_static.preprocess(float_path, os.path.join(scratch, "prepared.onnx"))
            onnx_static.quantize_int8(prepared, tmp, _calibration(job))
            notes.append("static int8 QDQ: uint8 activations per tensor, int8 weights per channel (MinMax)")
    return Converted(job.target.path, notes=notes, details=details)


def _calibration(job: Job) -> dict[str, np.ndarray]:
    """Representative inputs by input name (a quantization-aware model needs them only for tensors it
    left unquantized)."""
    x = job.inputs("rep_x")
    if x is None:
        x = job.inputs("eval_x")
    n = job.target.options.get("calibration_samples") or 200
    return {k: (np.asarray(v[:n], np.float32) if np.asarray(v).dtype.kind == "f" else np.asarray(v[:n]))
            for k, v in x.items()}


# ONNX ops that compute a Keras layer's weighted op, and those of the weightless layers the budget may keep
# float (zoo.formats.ptq.budget.quantizable_layers: adds, pooling, concatenation, softmax, custom layers' ops).
WEIGHTED_OPS = ("Conv", "MatMul", "Gemm", "ConvTranspose")
NEW_RANGE_OPS = ("Add", "Sub", "Mul", "Sum", "Mean", "Concat", "GlobalAveragePool", "AveragePool", "ReduceMean",
                 "Softmax", "Slice", "Pad")


def layer_nodes(model_path, layers) -> dict[str, list[str]]:
    """Keras layer -> the names of the ONNX nodes that compute its weighted op (or its add, pooling, ...).

    tf2onnx renames convolutions (`Conv__62`), but their weights keep the TF name scope of the Keras
    layer (`model_1/stage1_conv_1/...`), so a node belongs to the layer its weight is named after;
    a weightless op keeps that scope in its own name or its output's.
    """
    import onnx

    model = onnx.load(str(model_path))
    initializers = {i.name for i in model.graph.initializer}
    found: dict[str, list[str]] = {}
    patterns = {layer: re.compile(rf"(^|/){re.escape(layer)}(_\d+)?/") for layer in layers}
    for node in model.graph.node:
        if node.op_type not in WEIGHTED_OPS + NEW_RANGE_OPS:
            continue
        names = [node.name, *node.output, *(i for i in node.input[1:] if i in initializers)]
        for layer, pattern in patterns.items():
            if any(pattern.search(n) for n in names):
                found.setdefault(layer, []).append(node.name)
                break
    return found


def _budgeted(job: Job, float_path: str, scratch: str, out_path) -> dict:
    """int8 with the layers the accuracy budget keeps float (`nodes_to_exclude`), calibrated once."""
    import shutil

    from zoo.formats.ptq import budget, onnx_static

    prepared = onnx_static.preprocess(float_path, os.path.join(scratch, "prepared.onnx"))
    nodes = layer_nodes(prepared, budget.quantizable_layers(job.keras_model()))
    calibration_x, cache = _calibration(job), os.path.join(scratch, "calibration.json")
    counter = iter(range(10**6))

    def quantize(exclude=(), only=None):
        path = os.path.join(scratch, f"trial_{next(counter)}.onnx")
        chosen = None if only is None else nodes[only]
        onnx_static.quantize_int8(prepared, path, calibration_x, exclude=[n for layer in exclude for n in nodes[layer]],
                                  only=chosen, calibration_cache=cache)
        return path

    result = budget.run(job, list(nodes), quantize, str(prepared), open_runner)
    shutil.copyfile(result.chosen.path, out_path)
    return result.details


class ONNXRunner(Runner):
    runtime = "onnxruntime (CPUExecutionProvider)"

    def __init__(self, path, num_threads: int = DEFAULT_THREADS, profile_prefix: str | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads
        if profile_prefix:  # a Chrome-trace JSON of per-node times, written by `end_profiling()`
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self._session.get_inputs()]
        self._outputs = [o.name for o in self._session.get_outputs()]

    def predict(self, x) -> dict[str, np.ndarray]:
        return predict_in_chunks(lambda b: dict(zip(self._outputs, self._session.run(None, b))), self.named(x), 1000)

    def end_profiling(self) -> str:
        """Stops profiling (see `profile_prefix`) and returns the trace file's path."""
        return self._session.end_profiling()


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> ONNXRunner:
    return ONNXRunner(path, num_threads=threads)
