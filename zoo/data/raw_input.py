"""How a model takes data as it is stored: one `RawInput` per kind of data, fitted on the train split.

A model trained by ``zoo train --data PATH`` carries its own preprocessing, so the
artifacts exported from it take what the user has (pixel values, table columns,
strings, a series in its own units) and nothing is lost between training and
serving. Each kind is one small class with the same interface:

- ``inputs()``: the ``keras.Input`` (or dict of them) of the end-to-end model;
- ``transform(inputs)``: the Keras preprocessing layers, fitted values baked in as
  constants (``Rescaling`` for pixels and for standardization, ``StringLookup``,
  ``TextVectorization(vocabulary=)``), giving what the architecture is built for
  (``core_shape``, ``core_dtype``);
- ``finish(outputs)``: output scaling back to the target's units (regression, forecasts);
- ``read(items)``: the user's files or rows as the arrays ``inputs()`` takes, for predictions;
- ``to_dict()`` / :func:`from_dict`: the JSON description stored in the artifact's metadata.

Fitted values are constants written into the traced graph. Standardization is
``Rescaling(scale=1/std, offset=-mean/std)`` rather than ``Normalization``: Keras's
``Normalization`` holds its mean and variance as eager tensors (or variables),
which a traced function captures, and ``tf2onnx.convert.from_function`` turns
captured tensors into graph inputs that onnxruntime then refuses ("Required
inputs ['.../standardize/Sub/y:0', '.../Sqrt/x:0'] are missing"); ``Rescaling``
casts its Python lists inside ``call``, so they become graph constants in every
format.

Keras is imported by the methods that build layers, not here: a kind names its raw input class, and
reading a path's facts (``zoo train --data PATH --dry-run``) imports no Keras. zoo's own layers among
them (``SmoothClip``, ``CategoryOneHot``) live in `zoo.data.table_scaling`, which registers them.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from zoo.errors import DataError, suggest

KINDS = ("image", "table", "text", "series")


@dataclasses.dataclass(frozen=True)
class ImageInput:
    """Images resized to ``image_size`` with ``channels`` channels, pixel values in [0, 255]."""

    image_size: tuple
    channels: int
    kind: str = "image"

    @property
    def core_shape(self) -> tuple:
        return (*self.image_size, self.channels)

    core_dtype = "float32"

    def inputs(self):
        import keras

        return keras.Input(self.core_shape, name="image")

    def transform(self, inputs):
        import keras

        return keras.layers.Rescaling(1 / 255, name="rescale")(inputs)

    def finish(self, outputs):
        return outputs

    def describe(self) -> str:
        h, w = self.image_size
        return f"images {h}x{w}x{self.channels}, pixel values 0-255 (Rescaling(1/255) inside the model)"

    def read(self, paths: Sequence[str]) -> np.ndarray:
        """Image files -> float32 ``(n, h, w, c)`` in [0, 255], decoded and resized as in training (by
        TensorFlow on its backend, else by Pillow and `zoo.data.image_folder.resize_bilinear`)."""
        from zoo.data.batches import uses_tf_data

        out = np.empty((len(paths), *self.core_shape), np.float32)
        if not uses_tf_data():
            from zoo.data.image_folder import decode_file

            for i, path in enumerate(paths):
                try:
                    out[i] = decode_file(path, self.image_size, self.channels)
                except (OSError, ValueError, SyntaxError) as e:
                    raise DataError(f"Image file {path} cannot be read as an image: {e}") from None
            return out
        import tensorflow as tf

        from zoo.data.image_folder import decode_image

        for i, path in enumerate(paths):
            try:
                out[i] = decode_image(tf.io.read_file(path), self.image_size, self.channels, raw=True).numpy()
            except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as e:
                raise DataError(f"Image file {path} cannot be read as an image: {e.message.splitlines()[0]}") from None
        return out

    def to_dict(self) -> dict:
        return {"kind": self.kind, "image_size": list(self.image_size), "channels": self.channels,
                "scale": "0-255"}


@dataclasses.dataclass(frozen=True)
class TableInput:
    """Numeric columns scaled with the train rows' statistics, then smoothly clipped where `clip` is set;
    categorical columns one-hot encoded with the train rows' categories (an extra slot for unseen ones).

    `mean` and `std` are the centre and scale subtracted and divided by: the mean and standard deviation
    (``scaling="standard"``) or the median and robust spread (``"robust"``, :mod:`zoo.data.table_scaling`).
    """

    numeric: tuple
    mean: tuple
    std: tuple
    categories: dict = dataclasses.field(default_factory=dict)  # column -> its categories
    target_scale: Optional[tuple] = None  # (mean, std) of a regression target: outputs in its units
    scaling: str = "standard"  # how mean and std were fitted: "standard" or "robust"
    clip: Optional[float] = None  # SmoothClip's bound after scaling (RealMLP-TD: 3), or None
    kind: str = "table"

    @property
    def columns(self) -> list:
        return list(self.numeric) + list(self.categories)

    @property
    def core_shape(self) -> tuple:
        return (len(self.numeric) + sum(len(c) + 1 for c in self.categories.values()),)

    core_dtype = "float32"

    def inputs(self):
        import keras

        numeric = keras.Input((len(self.numeric),), name="numeric" if self.categories else "features")
        if not self.categories:
            return numeric
        # Keys in sorted order: the flat order of the inputs (and of a SavedModel signature's) is then
        # the dict's own, so the model can be called with a list as well.
        return {"categorical": keras.Input((len(self.categories),), dtype="string", name="categorical"),
                "numeric": numeric}

    def transform(self, inputs):
        import keras

        from zoo.data.table_scaling import CategoryOneHot, SmoothClip

        numeric = inputs["numeric"] if self.categories else inputs
        x = standardize(self.mean, self.std)(numeric)
        if self.clip is not None:
            x = SmoothClip(self.clip, name="smooth_clip")(x)
        if not self.categories:
            return x
        onehot = CategoryOneHot([list(c) for c in self.categories.values()], name="categories")(inputs["categorical"])
        return keras.layers.Concatenate(name="features")([x, onehot])

    def finish(self, outputs):
        import keras

        if self.target_scale is None:
            return outputs
        mean, std = self.target_scale
        return keras.layers.Rescaling(float(std), offset=float(mean), name="to_units", dtype="float32")(outputs)

    def describe(self) -> str:
        how = "robust-scaled" if self.scaling == "robust" else "standardized"
        how += " and smoothly clipped" if self.clip is not None else ""
        text = f"table: {len(self.numeric)} numeric column(s) ({how} inside the model)"
        if self.categories:
            text += f", {len(self.categories)} categorical (one-hot inside the model)"
        return text

    def read(self, frame, source: str = "table"):
        """A DataFrame's columns in the order the model takes them (extra columns are ignored)."""
        from zoo.data.tables import numeric_column

        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            close = suggest(missing[0], [str(c) for c in frame.columns], n=3)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise DataError(f"{source} lacks the model's input column(s) {missing}.{hint} "
                            f"The model takes: {', '.join(self.columns)}.")
        x = np.stack([numeric_column(frame, c, source) for c in self.numeric], axis=1).astype(np.float32) \
            if self.numeric else np.zeros((len(frame), 0), np.float32)
        if not self.categories:
            return x
        cats = np.stack([frame[c].astype(str).to_numpy() for c in self.categories], axis=1).astype(object)
        return {"categorical": cats, "numeric": x}

    def to_dict(self) -> dict:
        return {"kind": self.kind, "numeric": list(self.numeric), "mean": list(self.mean), "std": list(self.std),
                "categories": {k: list(v) for k, v in self.categories.items()},
                "target_scale": None if self.target_scale is None else list(self.target_scale),
                "scaling": self.scaling, "clip": self.clip}


@dataclasses.dataclass(frozen=True)
class TextInput:
    """A raw string per example, tokenized inside the model by ``TextVectorization`` (lower-cased,
    punctuation stripped, split on whitespace) with the train texts' vocabulary."""

    vocabulary: tuple
    sequence_length: int
    column: Optional[str] = None  # the text column, for data read from a table
    kind: str = "text"
    # The train texts' words written with inner punctuation ("don't" -> "dont"): what a tokenizer without
    # TextVectorization's punctuation stripping must list (`zoo.data.text_rules.inner_forms`).
    inner_forms: dict = dataclasses.field(default_factory=dict, compare=False)

    @property
    def core_shape(self) -> tuple:
        return (self.sequence_length,)

    core_dtype = "int32"

    @property
    def vocab_size(self) -> int:
        """Token ids: 0 padding, 1 unknown, then the vocabulary (what TextVectorization emits)."""
        return len(self.vocabulary) + 2

    def inputs(self):
        import keras

        return keras.Input((), dtype="string", name="text")

    def transform(self, inputs):
        import keras

        return keras.layers.TextVectorization(
            vocabulary=list(self.vocabulary), output_sequence_length=self.sequence_length, name="tokenize"
        )(inputs)

    def finish(self, outputs):
        return outputs

    def describe(self) -> str:
        return (f"text: raw strings, tokenized inside the model (TextVectorization, {len(self.vocabulary)} "
                f"words, {self.sequence_length} tokens)")

    def read(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray([str(t) for t in texts], dtype=object)

    def to_dict(self) -> dict:
        # The vocabulary lives in the model; the description keeps its size only.
        return {"kind": self.kind, "vocabulary_size": len(self.vocabulary), "sequence_length": self.sequence_length,
                "text_column": self.column, **({"inner_forms": dict(self.inner_forms)} if self.inner_forms else {})}

    @classmethod
    def fit(cls, texts: Sequence[str], max_tokens: int = 20000, sequence_length: Optional[int] = None) -> "TextInput":
        """The vocabulary of `texts` (the train split), and a sequence length covering 95% of them."""
        import keras
        import tensorflow as tf

        layer = keras.layers.TextVectorization(max_tokens=max_tokens)
        layer.adapt(tf.data.Dataset.from_tensor_slices(list(texts)).batch(256))
        vocabulary = [t for t in layer.get_vocabulary() if t not in ("", "[UNK]")]
        if not vocabulary:
            raise DataError("The training texts have no words (after lower-casing and stripping punctuation).")
        if sequence_length is None:
            lengths = [len(t.split()) for t in texts]
            sequence_length = int(min(max(np.percentile(lengths, 95), 8), 512))
        from zoo.data.text_rules import inner_forms

        return cls(tuple(vocabulary), int(sequence_length), inner_forms=inner_forms(texts, vocabulary))


@dataclasses.dataclass(frozen=True)
class SeriesInput:
    """Windows of ``window`` steps of the value columns, in their own units; standardized inside
    the model, and the forecast of ``target`` scaled back to its units."""

    window: int
    horizon: int
    columns: tuple
    target: str
    mean: tuple
    std: tuple
    time_column: Optional[str] = None
    kind: str = "series"

    @property
    def core_shape(self) -> tuple:
        return (self.window, len(self.columns))

    core_dtype = "float32"

    def inputs(self):
        import keras

        return keras.Input(self.core_shape, name="sequence")

    def transform(self, inputs):
        return standardize(self.mean, self.std)(inputs)

    def finish(self, outputs):
        import keras

        j = list(self.columns).index(self.target)
        return keras.layers.Rescaling(float(self.std[j]), offset=float(self.mean[j]), name="to_units",
                                         dtype="float32")(outputs)

    def describe(self) -> str:
        return (f"series: the last {self.window} steps of {', '.join(self.columns)} -> the next {self.horizon} "
                f"of {self.target!r}, in its own units (standardization and scaling inside the model)")

    def read(self, frame, source: str = "series") -> np.ndarray:
        """The last `window` rows of a series table (indexed by time) as one ``(1, window, features)`` input."""
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise DataError(f"{source} lacks the model's column(s) {missing}; it has {list(map(str, frame.columns))}.")
        if len(frame) < self.window:
            raise DataError(f"{source} has {len(frame)} steps; the model needs the last {self.window}.")
        values = frame[list(self.columns)].to_numpy(dtype=np.float64)[-self.window:]
        if not np.isfinite(values).all():
            raise DataError(f"{source}: the last {self.window} steps have missing values; fill them first.")
        return values[None].astype(np.float32)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "window": self.window, "horizon": self.horizon, "columns": list(self.columns),
                "target": self.target, "mean": list(self.mean), "std": list(self.std),
                "time_column": self.time_column}


def standardize(mean, std):
    """``(x - mean) / std`` per feature, the fitted values as graph constants (see the module docstring)."""
    import keras

    scale = [1.0 / float(s) if s else 1.0 for s in std]
    return keras.layers.Rescaling(scale, offset=[-float(m) * k for m, k in zip(mean, scale)], name="standardize")


_CLASSES = {"image": ImageInput, "table": TableInput, "text": TextInput, "series": SeriesInput}


def from_dict(d: dict):
    """The `RawInput` a ``to_dict()`` described (text inputs come back without their vocabulary)."""
    kind = d.get("kind")
    if kind not in _CLASSES:
        raise ValueError(f"Unknown raw input kind {kind!r}; known: {', '.join(KINDS)}.")
    if kind == "image":
        return ImageInput(tuple(d["image_size"]), int(d["channels"]))
    if kind == "table":
        scale = d.get("target_scale")
        return TableInput(tuple(d["numeric"]), tuple(d["mean"]), tuple(d["std"]),
                          {k: tuple(v) for k, v in d.get("categories", {}).items()},
                          None if scale is None else tuple(scale), d.get("scaling", "standard"), d.get("clip"))
    if kind == "text":
        return TextInput((), int(d["sequence_length"]), d.get("text_column"), inner_forms=dict(d.get("inner_forms") or {}))
    return SeriesInput(int(d["window"]), int(d["horizon"]), tuple(d["columns"]), d["target"], tuple(d["mean"]),
                       tuple(d["std"]), d.get("time_column"))
