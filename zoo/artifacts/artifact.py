"""Any artifact zoo makes, opened in its own runtime with its metadata: `zoo.artifacts.load`, what `zoo predict`
and `zoo val` run.

    artifact = zoo.artifacts.load("exports/convnet_bn/convnet_bn_float32.onnx")
    artifact.metadata.class_names, artifact.metadata.task, artifact.metadata.description
    artifact = open_artifact("runs/convnet_bn-photos")        # a run directory: its last.keras
    artifact = open_artifact("saved_models/convnet_bn")       # a TF Serving base dir: the newest version
    artifact = open_artifact("exports/convnet_bn/convnet_bn_float32.tflite")
    outputs = artifact.predict(x)                             # the predictions output, numpy
    artifact.metadata.class_names

| path | opened as | runtime |
|---|---|---|
| ``*.keras`` | Keras model (``safe_mode=True``) | Keras / TensorFlow |
| a run directory (``last.keras`` or ``best.keras``) | that ``.keras`` | Keras / TensorFlow |
| a SavedModel version, a base dir of numbered versions, or a serving root with one model | the newest version's ``serving_default`` | TensorFlow |
| ``*.tflite`` | the format's runner | LiteRT interpreter (XNNPACK) |
| ``*.onnx`` | the format's runner | onnxruntime |
| a TF.js folder (``model.json``) | the format's runner | @tensorflow/tfjs in Node |
| an OpenVINO folder (``model.xml`` + ``.bin``) or its ``.xml`` | the format's runner | OpenVINO Runtime (CPU) |

The TFLite, ONNX, TF.js and SavedModel runtimes are the export formats' own runners
(``zoo.formats.<format>.open_runner``), the ones export verification uses: one loader per
runtime. Every artifact is scanned first (``zoo.scan.require_safe``): one holding ops that
reach outside the model is refused unless the user accepts exactly those ops. (`zoo.scan` has
no OpenVINO IR reader; an IR's opsets hold no op that reads files or runs code.)

A damaged artifact is an `ArtifactError` naming the file and what its runtime said of it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

from zoo.formats import metadata as metadata_lib
from zoo.scan.report import ArtifactError  # one error for a path no reader, scanner or runtime can take
from zoo.errors import ZooError

RUN_DIR_MODELS = ("last.keras", "best.keras")  # a run directory's models, in order of preference


@dataclasses.dataclass
class Artifact:
    """An artifact opened in its runtime. ``predict(x)`` takes the model's raw input (an array,
    or a dict for several inputs) and returns the predictions output as a numpy array."""

    path: Path
    kind: str  # keras, saved_model, tflite, onnx, tfjs, openvino
    metadata: Optional[metadata_lib.ModelMetadata]
    runner: Any
    runtime: str
    input_shape: tuple = ()  # per example, from the model's signature (None where free)
    input_dtype: str = "float32"

    def predict(self, x) -> np.ndarray:
        outputs = self.runner.predict(x)
        name = self.metadata.output if self.metadata else None
        if name in outputs:
            return np.asarray(outputs[name])
        if len(outputs) == 1:
            return np.asarray(next(iter(outputs.values())))
        raise ArtifactError(f"{self.path} has outputs {sorted(outputs)}; none is {name!r}.")


def resolve(path) -> tuple[Path, str]:
    """``(artifact path, kind)`` for a path a user gave: a file, a run dir, a SavedModel (base) dir, a TF.js dir."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path} does not exist.")
    if path.is_file():
        if path.suffix.lower() == ".xml":
            return path, "openvino"
        if path.suffix.lower() not in (".keras", ".tflite", ".onnx"):
            raise ArtifactError(f"{path} is not an artifact: expected .keras, .tflite, .onnx or OpenVINO .xml (or a "
                                "SavedModel, TF.js, OpenVINO or run directory).")
        return path, path.suffix.lower()[1:]
    if (path / "saved_model.pb").is_file():
        return path, "saved_model"
    if (path / "model.json").is_file():
        return path, "tfjs"
    if (path / metadata_lib.OPENVINO_XML).is_file():
        return path, "openvino"
    for name in RUN_DIR_MODELS:
        if (path / name).is_file():
            return path / name, "keras"
    versions = _versions(path)
    if versions:
        return versions[-1], "saved_model"
    served = [p for p in sorted(path.iterdir()) if p.is_dir() and _versions(p)]
    if len(served) == 1:  # a TF Serving root holding one model (zoo export's <out>/saved_model)
        return _versions(served[0])[-1], "saved_model"
    if served:
        raise ArtifactError(f"{path} serves several models ({', '.join(p.name for p in served)}); name one of them.")
    found = sorted(p.name for p in path.iterdir() if p.suffix in (".keras", ".tflite", ".onnx")
                   or (p / "model.json").is_file() or (p / "saved_model.pb").is_file() or p.name == "saved_model")
    hint = f" It holds {', '.join(found)}: name one of them." if found else ""
    raise ArtifactError(f"{path} is not a run directory ({' or '.join(RUN_DIR_MODELS)}), a SavedModel (or a base "
                        f"directory of numbered versions) or a TF.js model (model.json).{hint}")


def _versions(path: Path) -> list[Path]:
    """A TF Serving base directory's numbered SavedModel versions, oldest first."""
    return [p for _, p in sorted((int(p.name), p) for p in path.iterdir()
                                 if p.name.isdigit() and (p / "saved_model.pb").is_file())]


def open_artifact(path, num_threads: int = 2, *, allow_unsafe_ops=(), unsafe_deserialization: bool = False
                  ) -> Artifact:
    """Opens the artifact at `path` (see the module docstring) in its runtime, with its metadata.

    `allow_unsafe_ops` / `unsafe_deserialization`: what the user accepts of what `zoo scan` reports
    (the CLI's --allow-unsafe-ops, --unsafe-deserialization).
    """
    from zoo.scan import require_safe

    path, kind = resolve(path)
    if kind == "keras":
        from zoo.formats.model_io import load_model_file  # scans the file itself

        model = load_model_file(path, allow_unsafe_ops=allow_unsafe_ops, unsafe_deserialization=unsafe_deserialization)
        return _keras_artifact(path, model)
    if kind != "openvino":
        require_safe(path, allow_unsafe_ops)
    try:
        meta = metadata_lib.read(path)
    except Exception as e:  # a damaged file or metadata entry: name it and say what is wrong
        raise ArtifactError(f"{path}: its zoo metadata cannot be read ({_what(e)}); the {kind} artifact is damaged "
                            "or was not written by zoo.") from None
    try:
        return globals()[f"_open_{kind}"](path, meta, num_threads)
    except (ZooError, ImportError):  # ours already say what is wrong; a runtime not installed says what to install
        raise
    except Exception as e:  # the runtime refuses the file: a truncated or corrupt artifact
        raise ArtifactError(f"{path}: the {kind} runtime cannot open it ({_what(e)}); the artifact is damaged or "
                            "incomplete. Export it again.") from None


def load(artifact, *, num_threads: int = 2, allow_unsafe_ops=(), unsafe_deserialization: bool = False) -> Artifact:
    """Any exported artifact, opened in its runtime, with what it says about itself.

    `artifact`: a `.keras`, `.tflite` or `.onnx` file, a SavedModel (version or base directory), a TF.js
    folder, an OpenVINO folder (or its `.xml`), or a run directory. The result's `predict(x)` runs it;
    `metadata` (a `zoo.formats.metadata.ModelMetadata`, None for an artifact exported without any) gives
    the task, the class names, the input's meaning and the predictions output, read from inside the
    artifact itself (see `zoo.formats.metadata` for where each format keeps it).

    Raises:
        ArtifactError: a path that is no artifact (saying what it holds), or a damaged one (naming the file).
    """
    return open_artifact(artifact, num_threads, allow_unsafe_ops=allow_unsafe_ops,
                         unsafe_deserialization=unsafe_deserialization)


def _what(e: Exception) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0][:300]}" if lines else type(e).__name__


class _KerasRunner:
    runtime = "Keras (TensorFlow)"

    def __init__(self, model):
        self.model = model

    def predict(self, x, batch_size: int = 256) -> dict:
        import tensorflow as tf

        n = len(next(iter(x.values()))) if isinstance(x, dict) else len(x)
        parts = []
        for start in range(0, n, batch_size):
            batch = tf.nest.map_structure(lambda a: tf.constant(a[start:start + batch_size]), x)
            parts.append(tf.nest.flatten(self.model(batch, training=False)))
        names = self.model.output_names
        return {name: np.concatenate([p[i].numpy() for p in parts]) for i, name in enumerate(names)}


def _keras_artifact(path, model):
    from zoo.formats.trace import signature_of

    first = signature_of(model).inputs[0]  # a subclassed model too, from the shapes it was built with
    return Artifact(path, "keras", metadata_lib.of_model(model), _KerasRunner(model), _KerasRunner.runtime,
                    first.shape, first.dtype)


def _open_saved_model(path, meta, num_threads):
    from zoo.formats.saved_model import open_runner

    runner = open_runner(path)
    spec = next(iter(runner._sig.structured_input_signature[1].values()))
    return Artifact(path, "saved_model", meta, runner, runner.runtime, tuple(spec.shape[1:]), spec.dtype.name)


def _open_tflite(path, meta, num_threads):
    from ai_edge_litert.interpreter import Interpreter

    from zoo.formats import tflite
    from zoo.formats.signature import SERVING_SIGNATURE

    interpreter = Interpreter(model_path=str(path))
    runner_inputs = interpreter.get_signature_runner(SERVING_SIGNATURE).get_input_details()
    (detail,) = runner_inputs.values()
    shape = tuple(int(d) if d > 0 else None for d in detail["shape_signature"][1:])
    dtype = np.dtype(detail["dtype"]).name
    example = np.zeros((1, *(d or 1 for d in shape)), np.float32 if dtype == "int8" else dtype)
    runner = tflite.open_runner(path, threads=num_threads, example=example)
    return Artifact(path, "tflite", meta, runner, runner.runtime, shape, "float32" if dtype == "int8" else dtype)


def _open_onnx(path, meta, num_threads):
    from zoo.formats.onnx import open_runner

    runner = open_runner(path, threads=num_threads)
    (first,) = runner._session.get_inputs()
    shape = tuple(d if isinstance(d, int) else None for d in first.shape[1:])
    dtype = {"tensor(float)": "float32", "tensor(int32)": "int32", "tensor(int64)": "int64"}.get(first.type, "float32")
    return Artifact(path, "onnx", meta, runner, runner.runtime, shape, dtype)


def _open_tfjs(path, meta, num_threads):
    import json

    from zoo.formats.tfjs import open_runner

    runner = open_runner(path)
    spec = json.loads((Path(path) / "model.json").read_text())
    inputs = spec.get("signature", {}).get("inputs", {})
    shape, dtype = (), "float32"
    if inputs:
        first = next(iter(inputs.values()))
        dims = [int(d.get("size", -1)) for d in first.get("tensorShape", {}).get("dim", [])][1:]
        shape = tuple(d if d > 0 else None for d in dims)
        dtype = {"DT_INT32": "int32", "DT_FLOAT": "float32"}.get(first.get("dtype"), "float32")
    return Artifact(path, "tfjs", meta, runner, "@tensorflow/tfjs in Node", shape, dtype)


def _open_openvino(path, meta, num_threads):
    from zoo.formats.openvino import open_runner

    runner = open_runner(path.parent if path.is_file() else path, threads=num_threads)
    (first, *_) = runner._model.inputs
    dims = first.get_partial_shape()
    shape = tuple(d.get_length() if d.is_static else None for d in list(dims)[1:])
    return Artifact(path, "openvino", meta, runner, runner.runtime, shape, first.get_element_type().to_dtype().name)


def describe(artifact: Artifact) -> str:
    """One line: the artifact, its runtime and what its metadata says."""
    meta = artifact.metadata
    what = "no zoo metadata" if meta is None else f"{meta.task}" + (
        f", {len(meta.class_names)} classes" if meta.class_names else "") + f"; input: {meta.description}"
    return f"{artifact.path} ({artifact.kind}, {artifact.runtime}): {what}"


def relative(path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
