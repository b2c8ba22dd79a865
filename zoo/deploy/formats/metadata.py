"""What a model is for, stored inside the model and every artifact exported from it.

A model trained on your own data (``zoo train --data``) knows its task, its class names,
what its input is (pixels of a given size, which table columns, raw strings, a series window)
and the preprocessing it carries. :class:`ModelMetadata` holds that; ``zoo predict`` and
``zoo val`` read it back from any artifact, so predictions need nothing but the artifact.

It is one JSON document, the same everywhere, under the key ``zoo_metadata`` (``KEY``). Each format
module stores and reads it in its own place (its ``write_metadata`` and ``read_metadata``; the
table is ``zoo.deploy.formats.markdown_table()``'s, a column of each format's declaration), and
``zoo.deploy.formats.read_metadata(path)`` / ``write_metadata(path, metadata)`` find the format of a path.

A model not trained by zoo gets its metadata from `describe` (its class names and what its input is,
given by the caller or read from its signature and preprocessing layers), as
``zoo.deploy.export.export(model, ..., class_names=[...])`` does.

Writes are atomic: the artifact is rewritten beside itself and renamed into place
(``zoo.fileio.atomic_write_bytes``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

KEY = "zoo_metadata"
SCHEMA = "zoo.model_metadata/1"
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
        front_end: the model's first layer where the formats without string ops carry it as data
            (`zoo.deploy.formats.text_front.TextFront.to_dict`: TextVectorization's settings and
            vocabulary), else None (and left out of the JSON).
    """

    task: str
    input: dict
    class_names: Optional[tuple] = None
    target: Optional[str] = None
    output: str = "predictions"
    description: str = ""
    source: dict = dataclasses.field(default_factory=dict)
    front_end: Optional[dict] = None

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
        if d["front_end"] is None:
            del d["front_end"]
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


PREPROCESSING = ("Rescaling", "Normalization", "Resizing", "CenterCrop")  # preprocessing a model may carry inside


def describe(model, *, class_names=None, task: Optional[str] = None, input: Optional[dict] = None,
             output: Optional[str] = None, signature=None, output_names=None) -> Optional[ModelMetadata]:
    """The metadata to export `model` with: its own (`of_model`) with what is given laid over it, or, for a
    model without any, built from what is given and what the model says of itself. None if neither says
    anything (no attached metadata, no class names, task or input given).

    Args:
        class_names: label i is `class_names[i]`; their count must match the output's last axis.
        task: default "classification" when class names are given.
        input: what the input means, laid over what is read from the model: e.g. `{"channel_order": "RGB",
            "scale": "0-1", "mean": [...], "std": [...]}` for preprocessing the client must do.
        output: the output holding the predictions (default: the first, or the one with one unit per class).
        signature: `zoo.deploy.formats.trace.signature_of(model)`, when the caller has it.
        output_names: the model's output names (`zoo.deploy.formats.trace.name_outputs`) and, optionally, widths:
            `{name: last-axis size}`.
    """
    own = of_model(model)
    if own is None and class_names is None and task is None and input is None:
        return None
    if class_names is not None:
        if isinstance(class_names, str) or not all(isinstance(c, (str, int)) for c in class_names):
            raise ValueError(f"class_names must be a list of names. Received: class_names={class_names!r}")
        class_names = tuple(str(c) for c in class_names)
        if len(set(class_names)) != len(class_names):
            dup = sorted({c for c in class_names if class_names.count(c) > 1})
            raise ValueError(f"class_names has duplicates: {dup}.")
    widths = dict(output_names or {})
    if class_names is not None and widths:
        fitting = [n for n, w in widths.items() if w == len(class_names)]
        if output is None and fitting:
            output = fitting[0]
        elif not fitting:
            raise ValueError(f"{len(class_names)} class_names given, but no output has {len(class_names)} units: "
                             f"{', '.join(f'{n} ({w})' for n, w in widths.items())}.")
    if own is not None:
        return dataclasses.replace(
            own, class_names=class_names if class_names is not None else own.class_names,
            task=task or own.task, input={**own.input, **(input or {})}, output=output or own.output)
    read = _input_from_model(model, signature)
    described = {**read, **(input or {})}
    return ModelMetadata(
        task=task or ("classification" if class_names is not None else "regression"),
        input=described, class_names=class_names, output=output or next(iter(widths), "predictions"),
        description=_input_text(described), source={"model": model.name, "class": type(model).__name__})


def _input_from_model(model, signature=None) -> dict:
    """What the model says of its input: its signature, and the preprocessing layers it holds inside.

    One float input of shape (height, width, 1|3|4) is an image (`zoo.data.raw_input.ImageInput`'s keys);
    anything else is described as named tensors.
    """
    from zoo.deploy.formats.trace import signature_of

    signature = signature or signature_of(model)
    inside = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        name = type(layer).__name__
        if name == "Rescaling":
            inside.append(f"Rescaling(scale={_num(layer.scale)}, offset={_num(layer.offset)})")
        elif name == "Normalization":
            inside.append(f"Normalization(mean={_num(getattr(layer, 'mean', None))}, "
                          f"variance={_num(getattr(layer, 'variance', None))})")
        elif name in PREPROCESSING:
            inside.append(name)
    found: dict = {"preprocessing_inside": inside}
    (only, *more) = signature.inputs
    if not more and len(only.shape) == 3 and only.shape[-1] in (1, 3, 4) and None not in only.shape[:2] \
            and only.dtype.startswith("float"):
        # Pixels 0-255 where the model rescales them itself; else 0-1, the convention `zoo predict` assumed for
        # images without metadata. A caller's `input={"scale": ...}` (and mean/std) overrides it.
        rescaled = any(p.startswith("Rescaling") for p in inside)
        found.update(kind="image", image_size=list(only.shape[:2]), channels=int(only.shape[2]),
                     scale="0-255" if rescaled else "0-1")
    else:
        found.update(kind="tensors", inputs=[{"name": t.name, "shape": [d for d in t.shape], "dtype": t.dtype}
                                             for t in signature.inputs])
    return found


def _num(value) -> str:
    import numpy as np

    if value is None:
        return "None"
    array = np.asarray(value, dtype=np.float64).ravel()
    return f"{array[0]:.6g}" if array.size == 1 else "[" + ", ".join(f"{v:.4g}" for v in array[:8]) + \
        (", ...]" if array.size > 8 else "]")


def _input_text(d: dict) -> str:
    """The model card's line on the input."""
    if d.get("kind") == "image":
        h, w = d["image_size"]
        parts = [f"images {h}x{w}x{d['channels']}"]
    else:
        parts = ["; ".join(f"{t['name']} {tuple(t['shape'])} {t['dtype']}" for t in d.get("inputs", []))]
    for key in ("channel_order", "scale", "mean", "std"):
        if d.get(key) is not None:
            parts.append(f"{key.replace('_', ' ')} {d[key]}")
    inside = d.get("preprocessing_inside")
    parts.append(f"inside the model: {', '.join(inside)}" if inside else "no preprocessing inside the model")
    return ", ".join(parts)
