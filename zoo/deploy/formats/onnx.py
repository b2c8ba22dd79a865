"""ONNX via tf2onnx from the export's SavedModel, with a dynamic batch axis named "batch", run with
onnxruntime. `zoo.deploy.formats.onnx_convert` says why from the SavedModel (tf2onnx's
`from_function` turns a `Normalization` layer's constants into graph inputs) and what it rewrites."""

from __future__ import annotations

import numpy as np

from zoo.core.options import Option, int_range
from zoo.deploy.formats.base import DEFAULT_THREADS, Converted, Format, Job, Runner, atomic_output, predict_in_chunks

# tf2onnx 1.17 emits opsets up to 18; onnxruntime 1.31 runs all of them.
FORMAT = Format(
    name="onnx",
    artifact="{model}.onnx",
    runtime="onnxruntime (CPUExecutionProvider)",
    description="ONNX via tf2onnx from the SavedModel (constants frozen, Erfc rewritten), dynamic batch axis",
    options=(
        Option("opset", "ONNX opset", default=18, check=int_range(13, 18)),
    ),
)


def convert(job: Job) -> Converted:
    from zoo.deploy.formats.onnx_convert import convert_saved_model

    opset = job.target.options["opset"]
    proto, erfc = convert_saved_model(job.saved_model(), opset, job.layers)
    for value in [*proto.graph.input, *proto.graph.output]:  # tf2onnx names the free axes unk__N
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = "batch"
    with atomic_output(job.target.path) as tmp:
        tmp.write_bytes(proto.SerializeToString())
    notes = [f"opset {opset}"]
    if erfc:
        notes.append(f"{erfc} Erfc (exact GELU) rewritten as 1 - Erf")
    return Converted(job.target.path, notes=notes)


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
