"""What a user names as a model, resolved in one place: a registry name, a `.keras` (or legacy `.h5`) file, a
run folder, or an exported artifact.

`zoo export`, `zoo benchmark` and `zoo.export(...)` take any of them; they pass the reference on, not a loaded
model, so the plan keeps the file the model came from (converted from as it is, not saved again) and the run
folder (its record says which data the model was trained on: `zoo.deploy.export.ExportData.from_run`).

    ref = resolve_model("runs/convnet_bn-photos")     # ModelRef(kind='keras', path=.../last.keras, run=RunDir(...))
    model = ref.model                                 # scanned, then loaded in Keras's safe mode, once
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Any

from zoo.deploy.artifacts.artifact import ModelFileError, load_model_file, resolve
from zoo.deploy.formats.unsafe import Trust
from zoo.errors import suggest
from zoo.run_dir import RunDir

@dataclasses.dataclass(frozen=True)
class ModelRef:
    """A model as the user named it (see the module docstring)."""

    given: str  # what the user wrote
    kind: str  # "registry", or the `zoo.deploy.formats` kind of `path` (keras, h5, saved_model, tflite, ...)
    path: Path | None = None  # the file or folder of the model; None for a registry name
    run: RunDir | None = None  # the run folder it belongs to, where it does
    trust: Any = None  # what the user accepts of the file's scan (`zoo.deploy.formats.unsafe.Trust`)

    @functools.cached_property
    def model(self):
        """The keras.Model: a registry name built (untrained), a file scanned and loaded (once)."""
        if self.kind == "registry":
            import zoo.architectures

            return zoo.architectures.build(self.given)
        return load_model_file(self.path, trust=self.trust)  # another kind: scanned, then refused, saying so


def resolve_model(ref, trust=None) -> ModelRef:
    """`ref` (a name or path, or a `ModelRef`) as a `ModelRef`; nothing is loaded.

    Raises:
        UnknownNameError: neither a path nor a registered model (with the close names);
        ModelFileError: a path that does not exist (with the close names beside it);
        ArtifactError: a path that holds no model or artifact (saying what it holds).
    """
    if isinstance(ref, ModelRef):
        return ref if trust is None else dataclasses.replace(ref, trust=Trust.of(trust))
    given = os.fspath(ref)
    trust = Trust.of(trust)
    if not os.path.exists(given):
        if given.endswith((".keras", ".h5")) or os.sep in given or (os.altsep and os.altsep in given):
            _missing(given)
        import zoo.architectures

        zoo.architectures.model_info(given)  # an unknown name is an UnknownNameError with the close names
        return ModelRef(given, "registry", trust=trust)
    if os.path.isfile(given) and given.endswith(".keras"):
        path, kind = Path(given), "keras"  # an empty or corrupt one: loading it says exactly what is wrong
    else:
        path, kind = resolve(given)
    return ModelRef(given, kind, path=path, run=RunDir.of(path), trust=trust)


def _missing(ref: str):
    """A path that is not there: the error names the close names beside it."""
    path = Path(ref)
    parent = path.parent if path.parent.is_dir() else None
    close = suggest(path.name, [p.name for p in parent.iterdir()], n=3) if parent else []
    hint = f" Did you mean: {', '.join(str(parent / c) for c in close)}?" if close else ""
    raise ModelFileError(f"{ref} does not exist.{hint} Give a run folder, a .keras file, an exported artifact (or a "
                        "folder of them) or a registered model's name (`zoo list`).")
