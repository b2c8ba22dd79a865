"""TF.js graph model, converted from the SavedModel and run with @tensorflow/tfjs in Node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from zoo.deploy import model_io
from zoo.deploy.formats.base import Converted, Job, Runner, atomic_output

JS_DIR = Path(__file__).resolve().parent.parent / "js"
RUNNER_JS = JS_DIR / "run_tfjs.js"


def convert(job: Job) -> Converted:
    from zoo.deploy._tfjs_shim import convert_tf_saved_model

    model = job.keras_model()
    weights = job.target.variant or "float32"
    # tf.while_loop (Keras RNNs) needs control flow v2 ops in the graph model.
    control_flow_v2 = bool(model_io.recurrent_layers(model))
    with atomic_output(job.target.path) as tmp:
        convert_tf_saved_model()(
            job.saved_model(),
            str(tmp),
            signature_def="serving_default",
            saved_model_tags="serve",
            quantization_dtype_map=None if weights == "float32" else {weights: True},
            use_structured_outputs_names=True,  # outputs keyed "predictions", as in Keras
            control_flow_v2=control_flow_v2,
        )
    notes = ["control flow v2"] if control_flow_v2 else []
    if weights != "float32":
        notes.append(f"weights stored as {weights}")
    return Converted(job.target.path, notes=notes)


def node_runtime() -> tuple[str, str]:
    """(node executable, runner script); a clear error when either is missing."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed: TF.js verification runs the model in Node.")
    if not (JS_DIR / "node_modules" / "@tensorflow" / "tfjs").is_dir():
        raise RuntimeError(f"@tensorflow/tfjs is not installed: run `npm install` in {JS_DIR} (scripts/setup.sh does).")
    return node, str(RUNNER_JS)


class TFJSRunner(Runner):
    runtime = "@tensorflow/tfjs in Node"

    BACKENDS = ("wasm", "cpu")  # wasm is ~7x faster; cpu runs what wasm cannot (RNN TensorList graphs)

    def __init__(self, path):
        self._path = str(path)
        self._node, self._script = node_runtime()
        self._backends = list(self.BACKENDS)

    def _run(self, x: np.ndarray, latency_runs: int = 0, warmup: int = 0):
        errors = []
        while self._backends:
            try:
                return self._run_on(self._backends[0], x, latency_runs, warmup)
            except RuntimeError as e:
                errors.append(f"{self._backends[0]}: {e}")
                if len(self._backends) == 1:
                    break
                self._backends.pop(0)
        raise RuntimeError("; ".join(errors))

    def _run_on(self, backend: str, x: np.ndarray, latency_runs: int, warmup: int):
        with tempfile.TemporaryDirectory(prefix="zoo-tfjs-") as tmp:
            dtype = "int32" if np.issubdtype(x.dtype, np.integer) else "float32"
            np.ascontiguousarray(x, dtype=dtype).tofile(os.path.join(tmp, "input.bin"))
            request = {
                "model_dir": self._path,
                "input": {"path": os.path.join(tmp, "input.bin"), "dtype": dtype, "shape": list(x.shape)},
                "batch_size": 500,
                "latency_runs": latency_runs,
                "warmup_runs": warmup,
                "out_dir": os.path.join(tmp, "out"),
                "backend": backend,
            }
            Path(tmp, "request.json").write_text(json.dumps(request))
            proc = subprocess.run([self._node, self._script, os.path.join(tmp, "request.json")],
                                  capture_output=True, text=True, cwd=str(JS_DIR))
            if proc.returncode != 0:
                lines = proc.stderr.strip().splitlines()
                why = [line for line in lines if line.startswith("error: ")] or lines[-1:]
                raise RuntimeError(f"node exited with {proc.returncode}: {' | '.join(why)[:800]}")
            result = json.loads(Path(tmp, "out", "result.json").read_text())
            outputs = {
                name: np.fromfile(os.path.join(tmp, "out", o["file"]), dtype=np.float32).reshape(o["shape"])
                for name, o in result["outputs"].items()
            }
        self.runtime = f"@tensorflow/tfjs {result['tfjs_version']} in Node ({result['backend']} backend)"
        return outputs, result["latency_ms"]

    def predict(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return self._run(x)[0]

    def latencies_ms(self, x1: np.ndarray, runs: int, warmup: int) -> list[float]:
        return self._run(x1, runs, warmup)[1]  # timed inside Node: no process start in the numbers


def load(path, job: Job) -> Runner:
    return TFJSRunner(path)
