"""What a model is for, stored inside the model and every artifact exported from it.

A model trained on your own data (``zoo train --data``) knows its task, its class names,
what its input is (pixels of a given size, which table columns, raw strings, a series window)
and the preprocessing it carries. :class:`ModelMetadata` holds that; ``zoo predict`` and
``zoo val`` read it back from any artifact, so predictions need nothing but the artifact.

Where it is stored (one JSON document, the same everywhere, under the key ``zoo_metadata``):

| artifact | where |
|---|---|
| ``.keras`` | the model's config (``ZooModel.get_config``), so it survives ``model.save`` / ``load_model`` |
| SavedModel | ``assets.extra/zoo_metadata.json`` (TF Serving's folder for files the graph does not load) |
| TFLite | a flatbuffer ``metadata`` entry named ``zoo_metadata`` (the schema's slot for such data) |
| ONNX | ``metadata_props`` key ``zoo_metadata`` |
| TF.js | ``model.json``'s ``userDefinedMetadata.zoo_metadata`` |

Writes are atomic: the artifact is rewritten beside itself and renamed into place.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from pathlib import Path
from typing import Optional

KEY = "zoo_metadata"
SCHEMA = "zoo.model_metadata/1"
SAVED_MODEL_FILE = Path("assets.extra") / f"{KEY}.json"
TASKS = ("classification", "regression", "forecast", "language_model")


@dataclasses.dataclass(frozen=True)
class ModelMetadata:
    """A model's task, classes and input description.

    Attributes:
        task: "classification", "regression", "forecast" or "language_model".
        input: the raw input's description (``zoo.data.raw_input`` ``to_dict()``): its kind and
            what reading a file into it takes (image size, columns, window, ...).
        class_names: label i is ``class_names[i]`` (classifiers), else None.
        target: the predicted column (tables, series), else None.
        output: the name of the output holding the predictions.
        description: one line on the input and the preprocessing inside the model.
        source: provenance: the data path, the architecture, the recipe.
    """

    task: str
    input: dict
    class_names: Optional[tuple] = None
    target: Optional[str] = None
    output: str = "predictions"
    description: str = ""
    source: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}. Received: task={self.task!r}")
        if self.class_names is not None:
            object.__setattr__(self, "class_names", tuple(str(c) for c in self.class_names))

    @property
    def raw_input(self):
        """The input as a `zoo.data.raw_input` object (reads files into arrays)."""
        from zoo.data import raw_input

        return raw_input.from_dict(self.input)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["class_names"] = None if self.class_names is None else list(self.class_names)
        return {"schema": SCHEMA, **d}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelMetadata":
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            found = d.get("schema") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"Not zoo model metadata (expected schema {SCHEMA!r}, found {found!r}).")
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})

    @classmethod
    def from_json(cls, text: str) -> "ModelMetadata":
        return cls.from_dict(json.loads(text))


# ---------------------------------------------------------------- models in memory


def attach(model, metadata: Optional[ModelMetadata]) -> None:
    """Stores `metadata` on a Keras model; a `ZooModel` saves it with its config."""
    model.zoo_metadata = None if metadata is None else metadata.to_dict()


def of_model(model) -> Optional[ModelMetadata]:
    """The metadata a Keras model carries, or None."""
    d = getattr(model, "zoo_metadata", None)
    return None if d is None else ModelMetadata.from_dict(d)


# ---------------------------------------------------------------- artifacts on disk


def artifact_kind(path) -> str:
    """"keras", "saved_model", "tflite", "onnx" or "tfjs" for an artifact path (by its layout)."""
    path = Path(path)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix in (".keras", ".tflite", ".onnx"):
            return suffix[1:]
        raise ValueError(f"{path} is not a .keras, .tflite or .onnx file.")
    if (path / "saved_model.pb").is_file():
        return "saved_model"
    if (path / "model.json").is_file():
        return "tfjs"
    raise ValueError(f"{path} is neither a SavedModel (saved_model.pb) nor a TF.js model (model.json).")


def write(path, metadata: ModelMetadata) -> None:
    """Stores `metadata` in the artifact at `path` (any kind but .keras, which keeps it in its config)."""
    kind = artifact_kind(path)
    if kind == "keras":
        raise ValueError(f"{path}: a .keras file keeps its metadata in the model config; attach() it before saving.")
    _WRITERS[kind](Path(path), metadata.to_json())


def read(path) -> Optional[ModelMetadata]:
    """The metadata stored in the artifact at `path`, or None if it has none."""
    text = _READERS[artifact_kind(path)](Path(path))
    return None if text is None else ModelMetadata.from_json(text)


def _replace_file(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _write_saved_model(path: Path, text: str) -> None:
    target = path / SAVED_MODEL_FILE
    target.parent.mkdir(exist_ok=True)
    _replace_file(target, text.encode())


def _read_saved_model(path: Path) -> Optional[str]:
    target = path / SAVED_MODEL_FILE
    return target.read_text() if target.is_file() else None


def _write_tfjs(path: Path, text: str) -> None:
    model_json = path / "model.json"
    spec = json.loads(model_json.read_text())
    spec.setdefault("userDefinedMetadata", {})[KEY] = json.loads(text)
    _replace_file(model_json, json.dumps(spec).encode())


def _read_tfjs(path: Path) -> Optional[str]:
    d = json.loads((path / "model.json").read_text()).get("userDefinedMetadata", {}).get(KEY)
    return None if d is None else json.dumps(d)


def _write_onnx(path: Path, text: str) -> None:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    for prop in list(model.metadata_props):
        if prop.key == KEY:
            model.metadata_props.remove(prop)
    model.metadata_props.add(key=KEY, value=text)
    _replace_file(path, model.SerializeToString())


def _read_onnx(path: Path) -> Optional[str]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return next((p.value for p in model.metadata_props if p.key == KEY), None)


def _tflite_schema():
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


def _write_tflite(path: Path, text: str) -> None:
    schema = _tflite_schema()
    import flatbuffers

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(path.read_bytes(), 0))
    model.metadata = [m for m in (model.metadata or []) if m.name.decode() != KEY]
    buffer = schema.BufferT()
    buffer.data = list(text.encode())
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name = KEY
    entry.buffer = len(model.buffers) - 1
    model.metadata.append(entry)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    _replace_file(path, bytes(builder.Output()))


def _read_tflite(path: Path) -> Optional[str]:
    schema = _tflite_schema()
    model = schema.Model.GetRootAs(path.read_bytes(), 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name().decode() == KEY:
            return model.Buffers(entry.Buffer()).DataAsNumpy().tobytes().decode()
    return None


def _read_keras(path: Path) -> Optional[str]:
    """From the .keras zip's config.json, without loading the model."""
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError):
        return None
    d = config.get("config", {}).get(KEY)
    return None if d is None else json.dumps(d)


_WRITERS = {"saved_model": _write_saved_model, "tflite": _write_tflite, "onnx": _write_onnx, "tfjs": _write_tfjs}
_READERS = {**{k: globals()[f"_read_{k}"] for k in _WRITERS}, "keras": _read_keras}
