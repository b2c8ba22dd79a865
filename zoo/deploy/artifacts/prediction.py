"""`zoo predict ARTIFACT INPUTS...` and `zoo.predict(artifact, inputs)`: predictions on your files.

    result = zoo.predict("exports/convnet_bn/convnet_bn_float32.tflite", ["digits/"])
    print(result.table())            # per input: the top-k classes with their scores
    result.to_json(), result.to_csv()

The artifact (any kind `zoo.deploy.artifacts.load` opens) runs in its own runtime. Its metadata
(`zoo.deploy.formats.metadata`) says how to read the inputs and how to name the outputs:

| the model takes | INPUTS are | read as |
|---|---|---|
| images | image files and folders (searched recursively) | decoded and resized as in training |
| a table | CSV or Parquet files | the model's columns, by name, in its order |
| text | literal texts, ``.txt`` files (one text each), CSV files (the text column) | raw strings |
| a series | CSV files with the time column | the last `window` steps: one forecast |

An artifact without zoo metadata (a model trained on a registered dataset) takes ``.npy``
arrays, or images scaled to [0, 1] and resized to its input; classes are then indices.
Inputs are read and run in batches, with a progress line on stderr for large inputs.

Images and ``.npy`` arrays are read with Pillow and numpy (`zoo.deploy.artifacts.reading`), so predictions
of a TFLite, ONNX or OpenVINO artifact on them import neither TensorFlow nor Keras; tables, texts
and series are read by `zoo.data`'s readers.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import sys
import time
from typing import Optional, Sequence

import numpy as np

from zoo.deploy.artifacts import reading
from zoo.deploy.artifacts.artifact import Artifact, load
from zoo.errors import DataError
from zoo.image_files import image_files

BATCH_SIZE = 256
PROGRESS_MIN = 2 * BATCH_SIZE  # inputs above which a progress line is shown
FORMATS = ("table", "json", "csv")


@dataclasses.dataclass
class Predictions:
    """The predictions for a list of inputs.

    Attributes:
        artifact: the artifact's path; ``kind`` and ``runtime`` where it ran.
        task: the model's task ("classification", ...), or None without metadata.
        names: one label per input (a file path, ``file:row N``, a text).
        outputs: the predictions output, ``(inputs, ...)``: class scores, values or forecasts.
        class_names: label i is ``class_names[i]`` (classifiers with metadata).
        top_k: how many classes the table and the JSON show per input.
    """

    artifact: str
    kind: str
    runtime: str
    task: Optional[str]
    names: list
    outputs: np.ndarray
    class_names: Optional[tuple] = None
    top_k: int = 5
    target: Optional[str] = None
    skipped: list = dataclasses.field(default_factory=list)  # (input, reason) of inputs that could not be read

    @property
    def is_classifier(self) -> bool:
        return self.task == "classification" or (self.task is None and self.outputs.ndim == 2
                                                 and self.outputs.shape[1] > 1)

    def labels(self, index) -> str:
        return self.class_names[index] if self.class_names else str(index)

    def top(self, i: int) -> list[tuple[str, float]]:
        """The top-k ``(class, score)`` of input i, best first."""
        scores = self.outputs[i].reshape(-1)
        order = np.argsort(-scores, kind="stable")[: self.top_k]
        return [(self.labels(int(j)), float(scores[j])) for j in order]

    def rows(self) -> list[dict]:
        """One dict per input: its name and the prediction (top-k classes, or the values)."""
        out = []
        for i, name in enumerate(self.names):
            if self.is_classifier:
                top = self.top(i)
                out.append({"input": name, "class": top[0][0], "score": top[0][1],
                            "top": [{"class": c, "score": s} for c, s in top]})
            else:
                values = np.asarray(self.outputs[i], np.float64).reshape(-1)
                out.append({"input": name, "values": values.tolist()})
        return out

    def table(self) -> str:
        """The readable table `zoo predict` prints."""
        lines = []
        width = min(max((len(str(n)) for n in self.names), default=5), 60)
        for i, name in enumerate(self.names):
            shown = _shorten(str(name), width)
            if self.is_classifier:
                cells = "  ".join(f"{c} {s:.3f}" for c, s in self.top(i))
            else:
                values = np.asarray(self.outputs[i], np.float64).reshape(-1)
                label = "forecast" if self.task == "forecast" else (self.target or "value")
                cells = f"{label}: " + ", ".join(f"{v:.6g}" for v in values)
            lines.append(f"{shown:<{width}}  {cells}")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({"artifact": self.artifact, "kind": self.kind, "runtime": self.runtime, "task": self.task,
                           "classes": None if self.class_names is None else list(self.class_names),
                           "predictions": self.rows(),
                           "skipped": [{"input": i, "reason": r} for i, r in self.skipped]}, indent=2)

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        if self.is_classifier:
            classes = list(self.class_names or range(self.outputs.shape[1]))
            writer.writerow(["input", "class", "score", *[f"score_{c}" for c in classes]])
            for i, name in enumerate(self.names):
                top = self.top(i)[0]
                writer.writerow([name, top[0], f"{top[1]:.6g}", *[f"{v:.6g}" for v in self.outputs[i]]])
        else:
            values = self.outputs.reshape(len(self.names), -1)
            writer.writerow(["input", *[f"value_{j + 1}" for j in range(values.shape[1])]])
            for name, row in zip(self.names, values):
                writer.writerow([name, *[f"{v:.6g}" for v in row]])
        return buffer.getvalue()

    def render(self, fmt: str = "table") -> str:
        if fmt not in FORMATS:
            from zoo.errors import UnknownNameError

            raise UnknownNameError("output format", fmt, FORMATS)
        return {"table": self.table, "json": self.to_json, "csv": self.to_csv}[fmt]()


def _shorten(text: str, width: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= width else "..." + text[-(width - 3):]


def predict(artifact, inputs: Sequence, *, top_k: int = 5, batch_size: int = BATCH_SIZE,
            progress: Optional[bool] = None) -> Predictions:
    """Runs `artifact` (a path or an opened `Artifact`) on `inputs`; see the module docstring.

    `progress`: show a progress line on stderr (default: for more than a couple of batches).
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [os.fspath(i) if isinstance(i, os.PathLike) else i for i in inputs]
    if not inputs:
        raise DataError("No inputs: give image files or folders, CSV files, texts or a series file.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer. Received: top_k={top_k!r}")
    art = artifact if isinstance(artifact, Artifact) else load(artifact)
    names, batches, skipped = read_inputs(art, inputs, batch_size)
    for where, why in skipped:
        print(f"skipped {where}: {why}", file=sys.stderr)
    if not names:
        raise DataError(f"None of the {len(skipped)} input(s) could be read.")
    total = len(names)
    show = progress if progress is not None else total > PROGRESS_MIN
    bar = _Progress(total) if show else None
    outputs = []
    for x in batches:
        outputs.append(art.predict(x))
        if bar:
            bar.update(len(outputs[-1]))
    if bar:
        bar.close()
    meta = art.metadata
    return Predictions(
        artifact=str(art.path), kind=art.kind, runtime=art.runtime,
        task=meta.task if meta else None, names=names, outputs=np.concatenate(outputs),
        class_names=meta.class_names if meta else None, top_k=top_k, target=meta.target if meta else None,
        skipped=list(skipped),
    )


def read_inputs(art: Artifact, inputs: list, batch_size: int = BATCH_SIZE):
    """``(names, iterator of model-input batches, skipped)`` for the user's inputs, read as the
    artifact's metadata says (see the module docstring). Image files that cannot be read are
    skipped: ``skipped`` lists them with the reason."""
    meta = art.metadata
    kind = meta.input.get("kind") if meta else None
    if kind == "image":
        files, skipped = reading.readable(image_files(inputs))
        size, channels = tuple(meta.input["image_size"]), int(meta.input["channels"])
        return files, (_client_side(meta.input, reading.read_images(files[i:i + batch_size], size, channels))
                       for i in range(0, len(files), batch_size)), skipped
    if kind == "table":
        names, x = _table_rows(meta.raw_input, inputs)
        return names, _chunks(x, batch_size), []
    if kind == "text":
        names, texts = _texts(inputs, meta.input.get("text_column"))
        return names, _chunks(meta.raw_input.read(texts), batch_size), []
    if kind == "series":
        names, x = _series_windows(meta.raw_input, inputs)
        return names, _chunks(x, batch_size), []
    return _without_metadata(art, inputs, batch_size)


def _client_side(described: dict, pixels: np.ndarray) -> np.ndarray:
    """The preprocessing an image model's metadata says the client does (`zoo.deploy.formats.metadata.describe`):
    pixels read as 0-255 become 0-1 for `scale: "0-1"`, then `(x - mean) / std` where given."""
    x = pixels / 255.0 if described.get("scale") == "0-1" else pixels
    if described.get("mean") is not None:
        x = x - np.asarray(described["mean"], np.float32)
    if described.get("std") is not None:
        x = x / np.asarray(described["std"], np.float32)
    return x.astype(np.float32)


def _chunks(x, batch_size):
    n = len(next(iter(x.values()))) if isinstance(x, dict) else len(x)
    for start in range(0, n, batch_size):
        yield {k: v[start:start + batch_size] for k, v in x.items()} if isinstance(x, dict) \
            else x[start:start + batch_size]


def _table_rows(raw, inputs):
    from zoo.data.tables import read_table

    names, parts = [], []
    for path in inputs:
        if not os.path.isfile(path):
            raise DataError(f"Input {path} is not a file; this model takes table rows (CSV or Parquet files).")
        frame, source = read_table(path)
        parts.append(raw.read(frame, source))
        names += [f"{os.path.basename(path)}:row {i}" for i in range(len(frame))]
    if isinstance(parts[0], dict):
        return names, {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return names, np.concatenate(parts)


def _texts(inputs, text_column=None):
    """Literal texts, .txt files (one text each), folders of .txt files and CSV files (a text column)."""
    from zoo.data.char_text import read_text_file
    from zoo.data.labelled_text import TEXT_SUFFIXES

    names, texts = [], []
    for item in inputs:
        if os.path.isdir(item):
            files = sorted(os.path.join(d, f) for d, _, fs in os.walk(item) for f in fs
                           if f.lower().endswith(TEXT_SUFFIXES))
            if not files:
                raise DataError(f"Folder {item} has no text files ({', '.join(TEXT_SUFFIXES)}).")
            for f in files:
                names.append(f)
                texts.append(read_text_file(f))
        elif os.path.isfile(item) and item.lower().endswith((".csv", ".parquet", ".pq")):
            from zoo.data.tables import read_table

            frame, source = read_table(item)
            column = text_column if text_column in frame.columns else None
            if column is None:
                text_cols = [c for c in frame.columns if frame[c].dtype == object]
                if len(text_cols) != 1:
                    raise DataError(f"{source}: cannot tell which column holds the texts ({text_cols}).")
                column = text_cols[0]
            names += [f"{os.path.basename(item)}:row {i}" for i in range(len(frame))]
            texts += frame[column].astype(str).tolist()
        elif os.path.isfile(item):
            names.append(item)
            texts.append(read_text_file(item))
        else:
            names.append(item)
            texts.append(item)
    return names, texts


def _series_windows(raw, inputs):
    from zoo.data.timeseries import read_series

    names, parts = [], []
    for path in inputs:
        if not os.path.isfile(path):
            raise DataError(f"Input {path} is not a file; this model forecasts from a CSV series with a time column.")
        frame = read_series(path, raw.time_column if raw.time_column else None)
        parts.append(raw.read(frame, path))
        names.append(f"{os.path.basename(path)}: after {frame.index[-1]}")
    return names, np.concatenate(parts)


def _without_metadata(art: Artifact, inputs, batch_size):
    """A model without zoo metadata: .npy arrays, or images scaled to [0, 1] at its input size."""
    if all(str(i).endswith(".npy") for i in inputs):
        x = np.concatenate([np.load(i) for i in inputs]).astype(art.input_dtype)
        names = [f"{os.path.basename(i)}[{j}]" for i in inputs for j in range(len(np.load(i, mmap_mode="r")))]
        return names, _chunks(x, batch_size), []
    shape = art.input_shape
    if len(shape) == 3 and shape[-1] in (1, 3, 4) and None not in shape[:2]:
        files, skipped = reading.readable(image_files(inputs))
        print(f"note: {art.path} has no zoo metadata: images are resized to {shape[0]}x{shape[1]} and scaled to "
              "[0, 1] (zoo's dataset convention); classes are shown as indices.", file=sys.stderr)
        return files, (reading.read_images(files[i:i + batch_size], shape[:2], int(shape[2])) / 255.0
                       for i in range(0, len(files), batch_size)), skipped
    raise DataError(f"{art.path} has no zoo metadata and takes inputs of shape {shape}: give .npy arrays of that "
                    "shape (models trained with `zoo train --data` read files themselves).")


class _Progress:
    """A one-line progress indicator on stderr: done/total, rate, time left."""

    def __init__(self, total: int):
        self.total, self.done, self.start = total, 0, time.perf_counter()

    def update(self, n: int) -> None:
        self.done += n
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate else 0.0
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}  "
                         f"{rate:.0f}/s  {left:.0f} s left ")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()
