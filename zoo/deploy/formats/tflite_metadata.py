"""The standard TFLite metadata that MediaPipe Tasks, the TFLite Task Library and Android Studio's ML
Model Binding read, written and read without tflite-support.

tflite-support writes it with `MetadataPopulator`, but needs protobuf < 4 (zoo pins >= 6). The format
is public: a `ModelMetadata` FlatBuffer (tflite-support's `metadata_schema.fbs`, file identifier
"M001") in a model buffer that the model's `metadata` list names "TFLITE_METADATA", and the files it
mentions (`labels.txt`, ...) in a zip archive appended to the model file, its offsets counted from the
file's start, as `MetadataPopulator` appends it (Python's `zipfile` in append mode). TFLite ignores
the bytes after its flatbuffer; the clients find the zip by its end record.

`SCHEMA` declares the tables once, field by field in schema order (a field's vtable slot is its
position; a union takes two slots, its type and its value); `encode` and `decode` walk any table of
it. What goes in (`model_metadata`, `image_input`, `class_scores`, `feature_tensor`) follows
tflite-support's own image classifier writer (`metadata_writers/image_classifier.py`): the input's
ImageProperties and NormalizationOptions, whose mean and std map stored pixels (0-255) to what the
graph takes, its range as Stats; the output's class names as a TENSOR_AXIS_LABELS file.

Rewriting a TFLite file's flatbuffer drops whatever was appended to it: `split` and `join` keep the
packed files across such rewrites (a `zoo_metadata` rewrite after the standard metadata otherwise
loses `labels.txt`, and the clients fail with "No associated file with name: labels.txt").
"""

from __future__ import annotations

import dataclasses
import io
import zipfile

import numpy as np

from zoo.deploy.formats.tflite_file import TFLiteFile

NAME = "TFLITE_METADATA"  # the model's metadata entry the clients look up
FILE_IDENTIFIER = b"M001"
# The oldest metadata parser that reads every field written here (`metadata_version.cc`: ImageProperties,
# NormalizationOptions in a tensor's process units, Stats and TENSOR_AXIS_LABELS files are all 1.0.0).
MIN_PARSER_VERSION = "1.0.0"
REGEX_TOKENIZER_PARSER_VERSION = "1.2.1"  # RegexTokenizerOptions (`metadata_version.cc`)
LABELS_FILE = "labels.txt"

# Enums (metadata_schema.fbs).
ASSOCIATED_FILE_TYPES = ("UNKNOWN", "DESCRIPTIONS", "TENSOR_AXIS_LABELS", "TENSOR_VALUE_LABELS",
                         "TENSOR_AXIS_SCORE_CALIBRATION", "VOCABULARY", "SCANN_INDEX_FILE")
COLOR_SPACES = ("UNKNOWN", "RGB", "GRAYSCALE")

# Table -> [(field, kind)], in schema order. Kinds: "string", "bool", "byte", "uint", "int", "float",
# "[string]", "[float]", "[uint]", "[ubyte]", a table name, "[Table]", an enum as "enum:NAME", and a union
# as "union:NAME" (two slots).
SCHEMA = {
    "AssociatedFile": [("name", "string"), ("description", "string"), ("type", "enum:AssociatedFileType"),
                       ("locale", "string"), ("version", "string")],
    "FeatureProperties": [],
    "ImageSize": [("width", "uint"), ("height", "uint")],
    "ImageProperties": [("color_space", "enum:ColorSpaceType"), ("default_size", "ImageSize")],
    "AudioProperties": [("sample_rate", "uint"), ("channels", "uint")],
    "BoundingBoxProperties": [("index", "[uint]"), ("type", "byte"), ("coordinate_type", "byte")],
    "ValueRange": [("min", "int"), ("max", "int")],
    "Content": [("content_properties", "union:ContentProperties"), ("range", "ValueRange")],
    "NormalizationOptions": [("mean", "[float]"), ("std", "[float]")],
    "ScoreCalibrationOptions": [("score_transformation", "byte"), ("default_score", "float")],
    "ScoreThresholdingOptions": [("global_score_threshold", "float")],
    "BertTokenizerOptions": [("vocab_file", "[AssociatedFile]")],
    "SentencePieceTokenizerOptions": [("sentencePiece_model", "[AssociatedFile]"), ("vocab_file", "[AssociatedFile]")],
    "RegexTokenizerOptions": [("delim_regex_pattern", "string"), ("vocab_file", "[AssociatedFile]")],
    "ProcessUnit": [("options", "union:ProcessUnitOptions")],
    "Stats": [("max", "[float]"), ("min", "[float]")],
    "TensorGroup": [("name", "string"), ("tensor_names", "[string]")],
    "TensorMetadata": [("name", "string"), ("description", "string"), ("dimension_names", "[string]"),
                       ("content", "Content"), ("process_units", "[ProcessUnit]"), ("stats", "Stats"),
                       ("associated_files", "[AssociatedFile]")],
    "CustomMetadata": [("name", "string"), ("data", "[ubyte]")],
    "SubGraphMetadata": [("name", "string"), ("description", "string"),
                         ("input_tensor_metadata", "[TensorMetadata]"), ("output_tensor_metadata", "[TensorMetadata]"),
                         ("associated_files", "[AssociatedFile]"), ("input_process_units", "[ProcessUnit]"),
                         ("output_process_units", "[ProcessUnit]"), ("input_tensor_groups", "[TensorGroup]"),
                         ("output_tensor_groups", "[TensorGroup]"), ("custom_metadata", "[CustomMetadata]")],
    "ModelMetadata": [("name", "string"), ("description", "string"), ("version", "string"),
                      ("subgraph_metadata", "[SubGraphMetadata]"), ("author", "string"), ("license", "string"),
                      ("associated_files", "[AssociatedFile]"), ("min_parser_version", "string")],
}
ENUMS = {"AssociatedFileType": ASSOCIATED_FILE_TYPES, "ColorSpaceType": COLOR_SPACES}
UNIONS = {  # member i is union type i + 1 (0 is NONE)
    "ContentProperties": ("FeatureProperties", "ImageProperties", "BoundingBoxProperties", "AudioProperties"),
    "ProcessUnitOptions": ("NormalizationOptions", "ScoreCalibrationOptions", "ScoreThresholdingOptions",
                           "BertTokenizerOptions", "SentencePieceTokenizerOptions", "RegexTokenizerOptions"),
}
_SCALARS = {"bool": "Bool", "byte": "Int8", "uint": "Uint32", "int": "Int32", "float": "Float32", "ubyte": "Uint8"}


# ----------------------------------------------------------------------------- FlatBuffers, from SCHEMA


def encode(table: str, value: dict, builder) -> int:
    """Writes `value` (field -> value; a union as `(member, dict)`, an enum by name) as a `table`; returns
    its offset. Unknown fields are an error naming the table's fields."""
    fields = SCHEMA[table]
    unknown = sorted(set(value) - {name for name, _ in fields})
    if unknown:
        raise ValueError(f"{table} has no field(s) {unknown}; its fields: {[name for name, _ in fields]}")
    offsets = {name: _encode_child(kind, value[name], builder) for name, kind in fields
               if value.get(name) is not None and _is_offset(kind)}
    builder.StartObject(sum(2 if kind.startswith("union:") else 1 for _, kind in fields))
    slot = 0
    for name, kind in fields:
        given = value.get(name)
        if kind.startswith("union:"):
            if given is not None:
                member, _ = given
                builder.PrependUint8Slot(slot, UNIONS[kind[6:]].index(member) + 1, 0)
                builder.PrependUOffsetTRelativeSlot(slot + 1, offsets[name], 0)
            slot += 2
            continue
        if given is not None:
            if name in offsets:
                builder.PrependUOffsetTRelativeSlot(slot, offsets[name], 0)
            elif kind.startswith("enum:"):
                builder.PrependInt8Slot(slot, ENUMS[kind[5:]].index(given), 0)
            else:
                getattr(builder, f"Prepend{_SCALARS[kind]}Slot")(slot, given, 0)
        slot += 1
    return builder.EndObject()


def _is_offset(kind: str) -> bool:
    return not (kind in _SCALARS or kind.startswith("enum:"))


def _encode_child(kind: str, value, builder) -> int:
    if kind == "string":
        return builder.CreateString(value)
    if kind.startswith("union:"):
        member, fields = value
        return encode(member, fields, builder)
    if not kind.startswith("["):
        return encode(kind, value, builder)
    inner = kind[1:-1]
    if inner in _SCALARS:
        dtype = {"float": np.float32, "uint": np.uint32, "ubyte": np.uint8}[inner]
        return builder.CreateNumpyVector(np.asarray(value, dtype))
    items = [builder.CreateString(v) if inner == "string" else encode(inner, v, builder) for v in value]
    builder.StartVector(4, len(items), 4)
    for item in reversed(items):
        builder.PrependUOffsetTRelative(item)
    return builder.EndVector()


def decode(table: str, buf: bytes, position: int | None = None) -> dict:
    """The `table` at `position` in `buf` (default: the root) as a dict of the fields that are set."""
    import flatbuffers
    from flatbuffers.table import Table

    if not isinstance(buf, bytearray):
        buf = bytearray(buf)
    if position is None:
        position = flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0)
    tab = Table(buf, position)
    out, slot = {}, 0
    for name, kind in SCHEMA[table]:
        if kind.startswith("union:"):
            kind_at, value_at = tab.Offset(4 + 2 * slot), tab.Offset(6 + 2 * slot)
            member = tab.Get(flatbuffers.number_types.Uint8Flags, kind_at + tab.Pos) if kind_at else 0
            if member and value_at:
                name_of = UNIONS[kind[6:]][member - 1]
                out[name] = (name_of, decode(name_of, buf, tab.Indirect(value_at + tab.Pos)))
            slot += 2
            continue
        at = tab.Offset(4 + 2 * slot)
        slot += 1
        if at:
            out[name] = _decode_field(tab, kind, at, buf)
    return out


def _decode_field(tab, kind: str, at: int, buf: bytes):
    import flatbuffers

    flags = flatbuffers.number_types
    if kind == "string":
        return tab.String(at + tab.Pos).decode()
    if kind.startswith("enum:"):
        return ENUMS[kind[5:]][tab.Get(flags.Int8Flags, at + tab.Pos)]
    if kind in _SCALARS:
        return tab.Get(getattr(flags, f"{_SCALARS[kind]}Flags"), at + tab.Pos)
    if not kind.startswith("["):
        return decode(kind, buf, tab.Indirect(at + tab.Pos))
    inner, start, n = kind[1:-1], tab.Vector(at), tab.VectorLen(at)
    if inner in _SCALARS:
        flag = getattr(flags, f"{_SCALARS[inner]}Flags")
        return [tab.Get(flag, start + i * flag.bytewidth) for i in range(n)]
    if inner == "string":
        return [tab.String(start + 4 * i).decode() for i in range(n)]
    return [decode(inner, buf, tab.Indirect(start + 4 * i)) for i in range(n)]


def to_bytes(metadata: dict) -> bytes:
    """A ModelMetadata dict as the flatbuffer the TFLITE_METADATA buffer holds."""
    import flatbuffers

    builder = flatbuffers.Builder(1024)
    builder.Finish(encode("ModelMetadata", metadata, builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


# ----------------------------------------------------------------------------- what goes in


def associated_file(name: str, description: str, type: str = "TENSOR_AXIS_LABELS") -> dict:
    return {"name": name, "description": description, "type": type}


def normalization(scale: str, mean=None, std=None) -> tuple[list[float], list[float]]:
    """(mean, std) such that `(pixel - mean) / std`, on pixels stored as 0-255, is what the graph takes.

    `scale` says what the graph takes ("0-255": a model with `Rescaling(1/255)` inside; "0-1"), and
    `mean`/`std` any normalization the client must still apply after that scaling (zoo's metadata
    `input` keys)."""
    per_unit = {"0-255": 1.0, "0-1": 255.0}
    if scale not in per_unit:
        raise ValueError(f"Unknown input scale {scale!r}; known: {sorted(per_unit)}.")
    unit = per_unit[scale]
    mean = np.atleast_1d(np.asarray(0.0 if mean is None else mean, np.float64))
    std = np.atleast_1d(np.asarray(1.0 if std is None else std, np.float64))
    return [float(v) for v in mean * unit], [float(v) for v in std * unit]


def image_input(name: str, *, channels: int, height: int, width: int, mean, std, description: str = "") -> dict:
    """TensorMetadata of an image input: colour space, size, NormalizationOptions, and the range of the
    normalized values (Stats) for pixels 0-255."""
    mean, std = np.asarray(mean, np.float64), np.asarray(std, np.float64)
    return {
        "name": name,
        "description": description or f"{'RGB' if channels == 3 else 'grayscale'} image, {height}x{width}, "
                                      "pixels 0-255",
        "content": {"content_properties": ("ImageProperties", {
            "color_space": "RGB" if channels == 3 else "GRAYSCALE",
            "default_size": {"width": int(width), "height": int(height)}})},
        "process_units": [{"options": ("NormalizationOptions", {"mean": list(mean), "std": list(std)})}],
        "stats": {"max": [float(v) for v in np.atleast_1d((255 - mean) / std)],
                  "min": [float(v) for v in np.atleast_1d((0 - mean) / std)]},
    }


def text_input(name: str, *, delimiter: str, vocabulary_file: str, description: str = "") -> dict:
    """TensorMetadata of a text model's token-id input: the RegexTokenizerOptions (delimiter regex, the
    `token id` vocabulary as a VOCABULARY file) that MediaPipe's TextClassifier tokenizes raw strings with
    (tflite-support's `metadata_writers/nl_classifier.py` writes the same)."""
    return {
        "name": name,
        "description": description or "token ids of a raw string (the RegexTokenizer's, from the vocabulary file)",
        "content": {"content_properties": ("FeatureProperties", {})},
        "process_units": [{"options": ("RegexTokenizerOptions", {
            "delim_regex_pattern": delimiter,
            "vocab_file": [associated_file(vocabulary_file, "token and id, one per line", "VOCABULARY")]})}],
    }


def class_scores(name: str, *, labels_file: str = LABELS_FILE, description: str = "", probabilities: bool = True) -> dict:
    """TensorMetadata of a classifier's output: one score per class, the classes named by `labels_file`;
    `probabilities` (a softmax output) gives it the range 0-1."""
    out = {
        "name": name,
        "description": description or ("probability of each class" if probabilities else
                                        "score of each class (not normalized to probabilities)"),
        "content": {"content_properties": ("FeatureProperties", {})},
        "associated_files": [associated_file(labels_file, "class names, one per line (line i: class i)")],
    }
    if probabilities:
        out["stats"] = {"max": [1.0], "min": [0.0]}
    return out


def feature_tensor(name: str, description: str = "", *, minimum=None, maximum=None, dimension_names=None) -> dict:
    """Generic TensorMetadata (non-image inputs, regression outputs): name, description, optional range."""
    out = {"name": name, "description": description, "content": {"content_properties": ("FeatureProperties", {})}}
    if minimum is not None and maximum is not None:
        out["stats"] = {"min": [float(v) for v in np.atleast_1d(minimum)],
                        "max": [float(v) for v in np.atleast_1d(maximum)]}
    if dimension_names:
        out["dimension_names"] = list(dimension_names)
    return out


def model_metadata(*, name: str, description: str, version: str, author: str, license: str, inputs: list,
                   outputs: list) -> dict:
    """The ModelMetadata dict: one subgraph, its inputs and outputs in the model's own order."""
    tokenizer = any(unit["options"][0] == "RegexTokenizerOptions" for t in inputs for unit in t.get("process_units", []))
    return {
        "name": name, "description": description, "version": version, "author": author, "license": license,
        "subgraph_metadata": [{"input_tensor_metadata": list(inputs), "output_tensor_metadata": list(outputs)}],
        "min_parser_version": REGEX_TOKENIZER_PARSER_VERSION if tokenizer else MIN_PARSER_VERSION,
    }


# ----------------------------------------------------------------------------- the model file


def split(data: bytes) -> tuple[bytes, bytes]:
    """(the model flatbuffer, the zip of associated files appended to it, or b"")."""
    end = data.rfind(b"PK\x05\x06")  # the zip's end-of-central-directory record
    if end < 0 or end + 22 + int.from_bytes(data[end + 20:end + 22], "little") != len(data):
        return data, b""
    directory_size = int.from_bytes(data[end + 12:end + 16], "little")
    directory_at = int.from_bytes(data[end + 16:end + 20], "little")
    if directory_at + directory_size != end:
        return data, b""
    first = min((i.header_offset for i in zipfile.ZipFile(io.BytesIO(data)).infolist()), default=directory_at)
    return data[:first], data[first:]


def join(model: bytes, files: dict[str, bytes]) -> bytes:
    """`model` with `files` appended as a zip (stored, offsets from the file's start, as MetadataPopulator)."""
    if not files:
        return model
    out = io.BytesIO()
    out.write(model)
    with zipfile.ZipFile(out, "a", compression=zipfile.ZIP_STORED) as archive:
        for name, content in files.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), content)
    return out.getvalue()


def associated_files(data: bytes) -> dict[str, bytes]:
    """The files packed in a TFLite model (name -> content); empty without any."""
    _, packed = split(data)
    if not packed:
        return {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def populate(data: bytes, metadata: dict, files: dict[str, bytes]) -> bytes:
    """`data` (a TFLite model, with or without packed files) with the standard metadata and exactly `files`
    packed; every file the metadata names must be among them."""
    named = _file_names(metadata)
    missing = sorted(named - set(files))
    if missing:
        raise ValueError(f"The metadata names associated file(s) {missing} that are not given; given: {sorted(files)}")
    model, _ = split(data)
    return join(TFLiteFile(model).with_metadata({NAME: to_bytes(metadata)}), files)


def _file_names(value) -> set[str]:
    """Every associated file name a metadata dict mentions."""
    names = set()
    if isinstance(value, dict):
        for key, v in value.items():
            if key in ("associated_files", "vocab_file", "sentencePiece_model"):
                names.update(f["name"] for f in v)
            else:
                names |= _file_names(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            names |= _file_names(v)
    return names


@dataclasses.dataclass(frozen=True)
class Standard:
    """The standard metadata read back from a TFLite file."""

    metadata: dict
    files: dict[str, bytes]

    @property
    def labels(self) -> list[str] | None:
        """The class names of the first output that has a TENSOR_AXIS_LABELS file."""
        for tensor in self.metadata.get("subgraph_metadata", [{}])[0].get("output_tensor_metadata", []):
            for f in tensor.get("associated_files", []):
                if f.get("type") == "TENSOR_AXIS_LABELS" and f["name"] in self.files:
                    return self.files[f["name"]].decode().splitlines()
        return None

    @property
    def normalization(self) -> tuple[list[float], list[float]] | None:
        """(mean, std) of the first input, or None."""
        for tensor in self.metadata.get("subgraph_metadata", [{}])[0].get("input_tensor_metadata", []):
            for unit in tensor.get("process_units", []):
                kind, options = unit["options"]
                if kind == "NormalizationOptions":
                    return options["mean"], options["std"]
        return None


def read(path) -> Standard | None:
    """The standard metadata of the TFLite file at `path`, or None without any."""
    with open(path, "rb") as f:
        data = f.read()
    buffer = TFLiteFile(data).metadata(NAME)
    if buffer is None:
        return None
    if buffer[4:8] != FILE_IDENTIFIER:
        raise ValueError(f"{path}: the {NAME} buffer is not a ModelMetadata flatbuffer (identifier "
                         f"{buffer[4:8]!r}, expected {FILE_IDENTIFIER!r}).")
    return Standard(decode("ModelMetadata", buffer), associated_files(data))


def write(path, metadata: dict, files: dict[str, bytes]) -> None:
    """Writes the standard metadata and its files into the TFLite file at `path`, atomically."""
    from pathlib import Path

    from zoo.fileio import atomic_write_bytes

    atomic_write_bytes(path, populate(Path(path).read_bytes(), metadata, files))
