"""The runtimes the inference benchmark times, as one table, each behind the same two calls.

Every runtime is the deploy package's own runner (`zoo.deploy.formats.*`), so the benchmark
measures exactly what `zoo export` verifies; Keras itself (`model(x)` and `model.predict`) is the
baseline. The peers are Keras's own exporters (`model.export(format="litert" | "onnx")`), loaded
in the same runners at the same thread counts.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from zoo.benchmarks.common import Timing, cpu_count, measure


@dataclasses.dataclass(frozen=True)
class Runtime:
    """One row family of the benchmark.

    `artifact` names what it runs: None for the Keras model itself, `(format, variant)` for an
    artifact of `zoo.deploy.export`, or `("peer", format)` for Keras's own exporter.
    """

    name: str
    artifact: tuple | None
    precision: str  # tolerance class of `zoo.deploy.verify.CRITERIA`
    description: str
    threaded: bool = False  # timed at each of --threads (LiteRT); else at the machine's CPUs
    peer: bool = False

    @property
    def exported(self) -> bool:
        return self.artifact is not None and not self.peer


RUNTIMES: dict[str, Runtime] = {
    r.name: r
    for r in (
        Runtime("keras_call", None, "float32", "Keras `model(x, training=False)`, eager"),
        Runtime("keras_predict", None, "float32", "Keras `model.predict(x)`"),
        Runtime("saved_model", ("saved_model", None), "float32", "TF SavedModel `serving_default`"),
        Runtime("litert_fp32", ("tflite", "float32"), "float32", "LiteRT fp32, XNNPACK", threaded=True),
        Runtime("litert_fp16", ("tflite", "float16"), "float16", "LiteRT fp16 weights, XNNPACK", threaded=True),
        Runtime("litert_int8", ("tflite", "int8"), "int8", "LiteRT full int8, XNNPACK", threaded=True),
        Runtime("onnx", ("onnx", None), "float32", "onnxruntime CPU (tf2onnx)"),
        Runtime("tfjs", ("tfjs", None), "float32", "TF.js in Node (wasm backend)"),
        Runtime("keras_litert", ("peer", "litert"), "float32", "Keras `model.export(format='litert')`, same "
                "LiteRT runner", threaded=True, peer=True),
        Runtime("keras_onnx", ("peer", "onnx"), "float32", "Keras `model.export(format='onnx')`, same "
                "onnxruntime runner", peer=True),
    )
}
PEER_OF = {"keras_litert": "litert_fp32", "keras_onnx": "onnx"}  # peer -> our runtime it is compared with


class Handle:
    """A runtime loaded for one model: `outputs(x)` for parity, `time(x, ...)` for speed."""

    @property
    def note(self) -> str:
        """How this runtime ran, where that is not obvious from its name."""
        return ""

    def outputs(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def time(self, x: np.ndarray, **measure_args) -> Timing:
        raise NotImplementedError

    def close(self) -> None:
        pass


class KerasHandle(Handle):
    def __init__(self, model, how: str):
        if how not in ("call", "predict"):
            raise ValueError(f"how must be 'call' or 'predict'. Received: how={how!r}")
        self._model, self._how = model, how

    def _run(self, x):
        if self._how == "call":
            return np.asarray(self._model(x, training=False))
        return self._model.predict(x, batch_size=len(x), verbose=0)

    def outputs(self, x):
        return np.concatenate([self._run(x[i : i + 256]) for i in range(0, len(x), 256)])

    def time(self, x, **measure_args):
        return measure(lambda: self._run(x), **measure_args)


class RunnerHandle(Handle):
    """A `zoo.deploy.formats.base.Runner`; the first output is the one compared."""

    def __init__(self, runner, note: str = ""):
        self._runner, self._note = runner, note

    @property
    def note(self) -> str:
        return self._note

    def outputs(self, x):
        return next(iter(self._runner.predict(x).values()))

    def time(self, x, **measure_args):
        if hasattr(self._runner, "timed_calls_ms"):  # TF.js: timed inside Node, no process start-up
            times = self._runner.timed_calls_ms(x, runs=measure_args.get("max_reps", 1000),
                                                warmup=measure_args.get("warmup", 2),
                                                budget_s=measure_args.get("budget_s"),
                                                min_runs=measure_args.get("min_reps", 3))
            return Timing(times)
        return measure(lambda: self._runner.predict(x), **measure_args)


class TFJSHandle(RunnerHandle):
    @property
    def note(self) -> str:  # the backend Node ended up on (wasm, or cpu where wasm cannot run the graph)
        return self._runner.runtime.replace("@tensorflow/", "")


def load(runtime: Runtime, model, path: str | None, threads: int | None, x1: np.ndarray) -> Handle:
    """`runtime` loaded for `model` (its artifact at `path`) with `threads` intra-op threads; `x1` is one
    example batch (LiteRT prepares on it)."""
    threads = threads or cpu_count()
    if runtime.name == "keras_call":
        return KerasHandle(model, "call")
    if runtime.name == "keras_predict":
        return KerasHandle(model, "predict")
    fmt = runtime.artifact[1] if runtime.peer else runtime.artifact[0]
    loaders: dict[str, Callable] = {"saved_model": _saved_model, "tflite": _litert, "litert": _litert,
                                    "onnx": _onnx, "tfjs": _tfjs}
    return loaders[fmt](path, threads, x1, model)


def _saved_model(path, threads, x1, model):
    from zoo.deploy.formats.saved_model import SavedModelRunner

    return RunnerHandle(SavedModelRunner(path))


def _litert(path, threads, x1, model):
    from zoo.deploy.formats.tflite import open_runner

    runner = open_runner(path, threads=threads, example=x1)
    notes = [f"fixed batch {runner.fixed_batch}: a batch runs as {runner.fixed_batch}-example calls"
             if runner.fixed_batch else "", "no XNNPACK" if "no XNNPACK" in runner.runtime else ""]
    note = "; ".join(n for n in notes if n)
    return RunnerHandle(runner, note)


def _onnx(path, threads, x1, model):
    from zoo.deploy.formats.onnx import ONNXRunner

    return RunnerHandle(ONNXRunner(path, num_threads=threads))


def _tfjs(path, threads, x1, model):
    from zoo.deploy.formats.tfjs import TFJSRunner

    # The pure-JS cpu backend is the fallback for RNN graphs wasm cannot run; on a CNN it would take
    # minutes per batch, so a CNN that fails on wasm is reported as failed.
    from zoo.deploy import model_io

    backends = TFJSRunner.BACKENDS if model_io.recurrent_layers(model) else ("wasm",)
    return TFJSHandle(TFJSRunner(path, backends=backends))


def export_peer(model, fmt: str, path: str) -> str:
    """Keras's own exporter; raises what it raises (the benchmark records the text)."""
    model.export(path, format=fmt, verbose=False)
    return path
