"""Any artifact zoo makes, opened in its own runtime with its metadata: `zoo.deploy.artifacts.load`, what `zoo predict`
and `zoo val` run.

    artifact = zoo.deploy.artifacts.load("exports/convnet_bn/convnet_bn_float32.onnx")
    artifact.metadata.class_names, artifact.metadata.task, artifact.metadata.description
    artifact = zoo.deploy.artifacts.load("runs/convnet_bn-photos")        # a run directory: its model
    artifact = zoo.deploy.artifacts.load("saved_models/convnet_bn")       # a TF Serving base dir: the newest version
    outputs = artifact.predict(x)                                   # the predictions output, numpy

Which kind a path is, how it is opened and where its metadata is: `zoo.deploy.formats.detect` and each
format module (the table is `zoo.deploy.formats.markdown_table()`'s). Beyond the kinds, a path may be a run
directory (its model: `zoo.run_dir.RunDir.model_file`) or a TF Serving base directory (its newest numbered
version; a serving root holding one model: that model's). The runners are the formats' own
(`open_runner`), the ones export verification uses: one loader per runtime. Every artifact is scanned
first (`zoo.deploy.scan.require_safe`): one holding ops that reach outside the model is refused unless the
user accepts exactly those ops (`zoo.deploy.formats.unsafe.Trust`).

Opening a TFLite, ONNX or OpenVINO artifact imports neither TensorFlow nor Keras.
A damaged artifact is an `ArtifactError` naming the file and what its runtime said of it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

from zoo.errors import ZooError
from zoo.deploy.formats import KINDS, detect, expected_text, text_front
from zoo.deploy.formats.base import ArtifactError
from zoo.deploy.formats.runner import DEFAULT_THREADS
from zoo.deploy.formats.metadata import ModelMetadata
from zoo.deploy.formats.unsafe import Trust
from zoo.run_dir import RunDir


class ModelFileError(ArtifactError):
    """A model path that is missing or is not a loadable .keras file."""


@dataclasses.dataclass
class Artifact:
    """An artifact opened in its runtime. ``predict(x)`` takes the model's raw input (an array,
    or a dict for several inputs) and returns the predictions output as a numpy array.

    ``runner.inputs`` / ``runner.outputs`` are the runtime's own input and output spec
    (`zoo.deploy.formats.runner.Runner`); ``input_shape`` and ``input_dtype`` are the first input's.
    """

    path: Path
    kind: str  # a kind of zoo.deploy.formats: keras, saved_model, tflite, onnx, tfjs, openvino
    metadata: Optional[ModelMetadata]
    runner: Any

    @property
    def runtime(self) -> str:
        return self.runner.runtime

    @property
    def input_shape(self) -> tuple:
        """Per example, from the runtime's signature (None where free)."""
        return tuple(self.runner.inputs[0].shape) if self.runner.inputs else ()

    @property
    def input_dtype(self) -> str:
        return self.runner.inputs[0].dtype if self.runner.inputs else "float32"

    def predict(self, x) -> np.ndarray:
        outputs = self.runner.predict(x)
        name = self.metadata.output if self.metadata else None
        if name in outputs:
            return np.asarray(outputs[name])
        if len(outputs) == 1:
            return np.asarray(next(iter(outputs.values())))
        raise ArtifactError(f"{self.path} has outputs {sorted(outputs)}; none is {name!r}.")


def resolve(path) -> tuple[Path, str]:
    """``(artifact path, kind name)`` for a path a user gave: an artifact of any kind, a run dir, a SavedModel
    base dir or a serving root holding one model."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path} does not exist.")
    run = RunDir.of(path) if path.is_dir() else None
    if run is not None and run.model_file() is not None:
        return run.model_file(), "keras"
    try:
        return path, detect(path).name
    except ArtifactError:
        if path.is_file():
            raise
    versions = _versions(path)
    if versions:
        return versions[-1], "saved_model"
    served = [p for p in sorted(path.iterdir()) if p.is_dir() and _versions(p)]
    if len(served) == 1:  # a TF Serving root holding one model (zoo export's <out>/saved_model)
        return _versions(served[0])[-1], "saved_model"
    if served:
        raise ArtifactError(f"{path} serves several models ({', '.join(p.name for p in served)}); name one of them.")
    found = sorted(p.name for p in path.iterdir() if _is_artifact(p) or p.name == "saved_model")
    hint = f" It holds {', '.join(found)}: name one of them." if found else ""
    raise ArtifactError(f"{path} is not a run directory ({' or '.join(RunDir.MODELS)}), a base directory of "
                        f"numbered SavedModel versions, or an artifact ({expected_text()}).{hint}")


def _is_artifact(path: Path) -> bool:
    try:
        detect(path)
        return True
    except ArtifactError:
        return False


def _versions(path: Path) -> list[Path]:
    """A TF Serving base directory's numbered SavedModel versions, oldest first."""
    return [p for _, p in sorted((int(p.name), p) for p in path.iterdir()
                                 if p.name.isdigit() and (p / "saved_model.pb").is_file())]


def load_model_file(path, *, trust=None, compile: bool = True):
    """Loads a `.keras` file as a `keras.Model` after scanning it; a missing, corrupt or refused file is a clear
    error.

    The file is first read as data by `zoo.deploy.scan.require_safe`: Lambda layers, custom objects and Keras's
    non-modeling functions are refused unless `trust` (a `zoo.deploy.formats.unsafe.Trust`) accepts them. Keras
    then loads it with `safe_mode=True`, which still refuses Lambda bytecode, unless
    `trust.unsafe_deserialization` (the CLI's `--unsafe-deserialization`) says the user trusts it.

    Raises:
        ModelFileError: missing, not a file, not a .keras archive, or Keras cannot load it.
        zoo.deploy.scan.UnsafeArtifactError: the scan found ops `trust` does not accept.
    """
    import zipfile

    from zoo.deploy import scan
    from zoo.deploy.formats import keras as keras_file

    trust = Trust.of(trust)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(f"Model file {path!r} does not exist.")
    if not os.path.isfile(path) or not path.endswith(".keras") and not zipfile.is_zipfile(path):
        kind = detect(path)  # an unknown kind is an ArtifactError naming what is expected
        scan.require_safe(path, trust)
        raise ModelFileError(f"Model path {path!r} is a {kind.name} artifact; a .keras file is expected here "
                             "(export a Keras model to other formats from its .keras file).")
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"Model file {path!r} is corrupt or not a .keras file: it is not a zip archive.")
    scan.require_safe(path, trust)
    try:
        return keras_file.load(path, unsafe_deserialization=trust.unsafe_deserialization, compile=compile)
    except ArtifactError as e:
        raise ModelFileError(str(e)) from None


def load(artifact, *, threads: int = DEFAULT_THREADS, trust=None) -> Artifact:
    """Any artifact, opened in its runtime, with what it says about itself.

    `artifact`: a path of any kind `zoo.deploy.formats` knows (`.keras`, `.tflite`, `.onnx`, a SavedModel version or
    base directory, a TF.js folder, an OpenVINO folder or its `.xml`) or a run directory. The result's
    `predict(x)` runs it; `metadata` (a `zoo.deploy.formats.metadata.ModelMetadata`, None for an artifact exported
    without any) gives the task, the class names, the input's meaning and the predictions output, read from
    inside the artifact itself. `trust` (a `zoo.deploy.formats.unsafe.Trust`): what the user accepts of the scan
    (the CLI's --allow-unsafe-ops, --unsafe-deserialization).

    Raises:
        ArtifactError: a path that is no artifact (saying what it holds), or a damaged one (naming the file).
    """
    from zoo.deploy.scan import require_safe

    trust = Trust.of(trust)
    path, name = resolve(artifact)
    kind = KINDS[name]
    if name == "keras":
        from zoo.deploy.formats.keras import KerasRunner
        from zoo.deploy.formats.metadata import of_model

        model = load_model_file(path, trust=trust)  # scans the file itself
        return Artifact(path, name, of_model(model), KerasRunner(model))
    require_safe(path, trust)
    try:
        text = kind.read_metadata(path)
        meta = None if text is None else ModelMetadata.from_json(text)
    except Exception as e:  # a damaged file or metadata entry: name it and say what is wrong
        raise ArtifactError(f"{path}: its zoo metadata cannot be read ({_what(e)}); the {name} artifact is damaged "
                            "or was not written by zoo.") from None
    try:
        runner = text_front.wrap(kind.open_runner(path, threads=threads), text_front.of_metadata(text))
    except (ZooError, ImportError):  # ours already say what is wrong; a runtime not installed says what to install
        raise
    except Exception as e:  # the runtime refuses the file: a truncated or corrupt artifact
        raise ArtifactError(f"{path}: the {name} runtime cannot open it ({_what(e)}); the artifact is damaged or "
                            "incomplete. Export it again.") from None
    return Artifact(path, name, meta, runner)


def _what(e: Exception) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0][:300]}" if lines else type(e).__name__


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
