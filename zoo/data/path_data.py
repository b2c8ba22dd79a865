"""Your own data at a path: what it is, what to learn from it, and its splits, with each guess explained.

    data = zoo.data.from_path("photos/")                  # an image folder, one subfolder per class
    data = zoo.data.from_path("houses.csv", target="price")
    data = zoo.data.from_path("reviews/")                 # one subfolder of .txt files per class
    data = zoo.data.from_path("load.csv", horizon=24)     # a series: a CSV with a time column
    for line in data.explain(): print(line)               # every inference, why, and the flag to change it
    data.splits.train, data.raw_input, data.class_names

What ``zoo train --data PATH`` reads. The readers are the ones in this package
(:func:`~zoo.data.from_image_folder`, :func:`~zoo.data.from_table`,
:func:`~zoo.data.labelled_text.from_labelled_texts`, :func:`~zoo.data.from_series`), asked
for raw values (``raw=True``): the fitted preprocessing is returned as a
:mod:`zoo.data.raw_input` description that the model builds in, so its exports
take the data as stored.

How the kind is found:

- a folder whose class subfolders (or ``train/`` etc.) hold images: **image** classification;
- a folder whose class subfolders hold ``.txt`` files: **text** classification;
- a CSV or Parquet file: a **series** when ``horizon`` or ``time_column`` is given,
  or when it has a time column and no target-like column; **text** classification
  when one column holds free text (long, mostly distinct strings); else a **table**.

Splits are drawn with ``seed``, stratified by class (series: in time order);
folders named ``train/``, ``validation/`` (or ``val/``) and ``test/`` are kept.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

import numpy as np

from zoo.data import raw_input as raw
from zoo.data.image_folder import COLOR_MODES, IMAGE_EXTENSIONS, check_images, list_image_splits, split_folders
from zoo.data.splits import SplitData
from zoo.data.labelled_text import TEXT_SUFFIXES
from zoo.errors import DataError, suggest

TASKS = ("classification", "regression", "forecast")
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
TARGET_NAMES = ("target", "label", "labels", "class", "y", "category", "outcome")
MAX_CLASSES = 20  # an integer target with more distinct values is a quantity, not a class
MAX_IMAGE_SIDE = 224  # larger images are shrunk to this (the common ImageNet size)
VALIDATION_SPLIT, TEST_SPLIT = 0.1, 0.1


@dataclasses.dataclass(frozen=True)
class Inference:
    """One thing inferred from the data: its value, why, and the flag that overrides it."""

    name: str
    value: Any
    reason: str
    flag: str = ""

    def line(self) -> str:
        value = ", ".join(map(str, self.value)) if isinstance(self.value, (tuple, list)) else self.value
        override = f"  [{self.flag}]" if self.flag else ""
        return f"{self.name + ':':<14}{value} ({self.reason}){override}"


@dataclasses.dataclass(frozen=True)
class PathData:
    """What :func:`from_path` found and read.

    Attributes:
        path: the path read.
        kind: "image", "table", "text" or "series".
        task: "classification", "regression" or "forecast".
        splits: the reader's :class:`SplitData` (raw values; ``.train`` etc.).
        raw_input: the fitted preprocessing (:mod:`zoo.data.raw_input`).
        class_names: label i is ``class_names[i]`` (classification), else None.
        target: the predicted column (tables, series), else None.
        inferences: every guess made, in order.
        skipped: ``(file or line, reason)`` of what could not be read.
        notes: other things worth knowing (e.g. images of mixed sizes were resized).
        reading: the `from_path` arguments that read this data again the same way (inferred values
            fixed, the same seed and held-out fractions); models keep it in their metadata.
    """

    path: str
    kind: str
    task: str
    splits: SplitData
    raw_input: Any
    class_names: Optional[tuple]
    target: Optional[str]
    inferences: tuple
    skipped: tuple = ()
    notes: tuple = ()
    reading: dict = dataclasses.field(default_factory=dict)

    def dataset_info(self):
        """The facts a training run needs, as for a registered dataset (`zoo.data.DatasetInfo`)."""
        from zoo.data.loading import DatasetInfo

        units = len(self.class_names) if self.task == "classification" else (
            self.raw_input.horizon if self.task == "forecast" else 1)
        return DatasetInfo(name=self.path, input_shape=tuple(self.splits.input_shape),
                           num_classes=self.splits.num_classes, splits=self.splits.num_examples, source="path",
                           description=self.raw_input.describe(), output_units=units)

    def class_counts(self, split: str = "train") -> Optional[dict]:
        """Class name -> examples in `split` (classification only)."""
        if self.class_names is None or split not in self.splits.parts:
            return None
        labels = _labels(self, split)
        counts = np.bincount(labels, minlength=len(self.class_names))
        return {name: int(n) for name, n in zip(self.class_names, counts)}

    def imbalance(self, split: str = "train") -> Optional[str]:
        """A sentence on class imbalance in `split` (largest / smallest class), or None if balanced."""
        counts = self.class_counts(split)
        if not counts:
            return None
        most, least = max(counts, key=counts.get), min(counts, key=counts.get)
        ratio = counts[most] / max(counts[least], 1)
        shown = ", ".join(f"{k} {v}" for k, v in counts.items()) if len(counts) <= 10 else f"{len(counts)} classes"
        text = f"{split} examples per class: {shown}"
        if ratio >= 1.5:
            text += (f"; imbalanced: {most!r} has {ratio:.1f}x the examples of {least!r} "
                     "(accuracy alone can mislead; `zoo val` shows per-class recall)")
        return text

    def explain(self) -> list[str]:
        """Lines for people: the inferences, the splits, imbalance, skipped files and notes."""
        lines = [i.line() for i in self.inferences]
        sizes = ", ".join(f"{k} {v}" for k, v in self.splits.num_examples.items())
        lines.append(f"{'splits:':<14}{sizes}")
        balance = self.imbalance()
        if balance:
            lines.append(f"{'classes:':<14}{balance}")
        for note in self.notes:
            lines.append(f"{'note:':<14}{note}")
        if self.skipped:
            lines.append(f"{'skipped:':<14}{len(self.skipped)} unreadable file(s) or line(s):")
            lines += [f"  {where}: {why}" for where, why in self.skipped[:20]]
            if len(self.skipped) > 20:
                lines.append(f"  ... and {len(self.skipped) - 20} more (`zoo data info` lists all)")
        return lines


def _labels(data: PathData, split: str) -> np.ndarray:
    labels = getattr(data.splits, "labels", None)
    if labels:  # image folders: the labels of the listing, without decoding an image
        return np.asarray(labels[split], np.int64)
    batches = data.splits.dataset(split, shuffle=False, batch_size=4096).as_numpy_iterator()
    return np.concatenate([np.asarray(y, np.int64).reshape(-1) for _, y in batches])


def detect_kind(path: str, *, horizon=None, time_column=None, text_column=None) -> tuple[str, str]:
    """``(kind, reason)`` for the data at `path`, without reading it all."""
    if not os.path.exists(path):
        raise DataError(f"{path} does not exist.")
    if os.path.isdir(path):
        folder = split_folders(path).get("train", path)
        classes = sorted(e for e in os.listdir(folder)
                         if not e.startswith(".") and os.path.isdir(os.path.join(folder, e)))
        if not os.listdir(path):
            raise DataError(f"Folder {path} is empty; expected one subfolder per class (of images or .txt files).")
        counts = {"image": 0, "text": 0}
        for name in classes:
            for _, _, files in os.walk(os.path.join(folder, name)):
                for f in files:
                    low = f.lower()
                    counts["image"] += low.endswith(IMAGE_EXTENSIONS)
                    counts["text"] += low.endswith(TEXT_SUFFIXES)
        if not classes:
            loose = [f for f in os.listdir(folder) if f.lower().endswith(IMAGE_EXTENSIONS + TEXT_SUFFIXES)]
            detail = f"it holds {len(loose)} file(s) directly; move them into one subfolder per class" if loose \
                else "it has no subfolders"
            raise DataError(f"Folder {folder} has no class subfolders: {detail}.")
        if not counts["image"] and not counts["text"]:
            raise DataError(f"The class folders of {folder} ({', '.join(classes[:5])}) hold no images "
                            f"({', '.join(IMAGE_EXTENSIONS)}) and no text files ({', '.join(TEXT_SUFFIXES)}).")
        kind = "image" if counts["image"] >= counts["text"] else "text"
        what = "image" if kind == "image" else "text"
        return kind, f"{len(classes)} class folders with {counts[kind]} {what} files"
    low = path.lower()
    if low.endswith(TEXT_SUFFIXES):
        raise DataError(f"{path} is a single text file. `zoo train --data` classifies texts: give a folder with one "
                        "subfolder of text files per class, or a CSV with a text column. For a character language "
                        "model on one text, see zoo.data.from_text_files (the moby_dick_char_lstm recipe).")
    if not low.endswith(TABLE_SUFFIXES):
        raise DataError(f"{path}: zoo reads image or text folders and {', '.join(TABLE_SUFFIXES)} files; "
                        f"{os.path.splitext(path)[1] or 'a file without extension'} is none of them.")
    if horizon is not None or time_column is not None:
        return "series", "--horizon or --time-column given"
    if text_column is not None:
        return "text", f"--text-column {text_column} given"
    return "table", "a table file"


def _frame_kind(frame, target, source) -> tuple[str, str, Optional[str]]:
    """For a table file: ``(kind, reason, text column)``: a series, text classification or a table."""
    from zoo.data.timeseries import find_time_column

    if target is None and _target_like(frame) is None:
        time_col = find_time_column(frame)
        if time_col is not None:
            return "series", f"time column {time_col!r} and no target-like column", None
    text_col = _text_column(frame, exclude=target)
    if text_col is not None:
        return "text", f"column {text_col!r} holds free text", text_col
    return "table", f"{len(frame.columns)} columns", None


def _target_like(frame) -> Optional[str]:
    lowered = {str(c).strip().lower(): c for c in frame.columns}
    return next((lowered[n] for n in TARGET_NAMES if n in lowered), None)


def _text_column(frame, exclude=None) -> Optional[str]:
    """A column of long, mostly distinct strings (several words on average), or None."""
    import pandas as pd

    for col in frame.columns:
        if col == exclude or pd.api.types.is_numeric_dtype(frame[col]):
            continue
        values = frame[col].dropna().astype(str)
        if values.empty:
            continue
        words = values.str.split().str.len().mean()
        if words >= 4 and values.nunique() >= 0.5 * len(values):
            return col
    return None


def from_path(
    path,
    *,
    target: Optional[str] = None,
    task: Optional[str] = None,
    features=None,
    categorical=None,
    text_column: Optional[str] = None,
    time_column: Optional[str] = None,
    horizon: Optional[int] = None,
    window: Optional[int] = None,
    image_size=None,
    color_mode: Optional[str] = None,
    validation_split: Optional[float] = None,
    test_split: Optional[float] = None,
    seed: int = 0,
    batch_size: int = 32,
    classes=None,
    scaling: Optional[str] = None,
) -> PathData:
    """Reads `path` as zoo train does: see the module docstring. Every argument left None is inferred."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file or folder path, got {type(path).__name__}.")
    path = os.path.abspath(os.fspath(path))
    if task is not None and task not in TASKS:
        from zoo.errors import UnknownNameError

        raise UnknownNameError("task", task, TASKS)
    kind, why = detect_kind(path, horizon=horizon, time_column=time_column, text_column=text_column)
    common = {"seed": seed, "batch_size": batch_size}
    fractions = {"validation_split": VALIDATION_SPLIT if validation_split is None else validation_split,
                 "test_split": TEST_SPLIT if test_split is None else test_split}
    if classes is not None:
        classes = [str(c) for c in classes]
        if len(classes) < 2:
            raise DataError(f"classes must name at least two classes, got {classes}.")
    result = _read(path, kind, why, target, task, features, categorical, text_column, time_column, horizon, window,
                   image_size, color_mode, fractions, common, classes, scaling)
    reading = {**_reading(result), **fractions, "seed": seed}
    if classes is not None:
        reading["classes"] = list(classes)
    return dataclasses.replace(result, reading=reading)


def _reading(data: PathData) -> dict:
    """The `from_path` arguments that fix what was inferred (JSON-ready)."""
    r = data.raw_input
    if data.kind == "image":
        color = {1: "grayscale", 3: "rgb", 4: "rgba"}[r.channels]
        return {"image_size": list(r.image_size), "color_mode": color}
    if data.kind == "table":
        return {"target": data.target, "task": data.task, "features": [*r.numeric, *r.categories],
                "categorical": list(r.categories), "scaling": r.scaling}
    if data.kind == "text":
        return {"target": data.target, "text_column": r.column} if r.column else {}
    return {"target": r.target, "time_column": r.time_column, "horizon": r.horizon, "window": r.window}


def _read(path, kind, why, target, task, features, categorical, text_column, time_column, horizon, window,
          image_size, color_mode, fractions, common, classes, scaling=None) -> PathData:
    if kind == "image":
        return _images(path, why, image_size, color_mode, task, fractions, common, classes)
    if kind == "text" and os.path.isdir(path):
        return _text_folder(path, why, task, fractions, common, classes)
    from zoo.data.tables import read_table

    frame, source, skipped = read_table(path, with_skipped=True)
    if kind == "table":
        kind, why, found_text = _frame_kind(frame, target, source)
        text_column = text_column or found_text
    if kind == "series" and classes is not None:
        raise DataError(f"{source} is read as a series (forecasting); --classes does not apply.")
    if kind == "series":
        result = _series(path, frame, source, why, target, time_column, horizon, window, task, fractions, common)
    elif kind == "text":
        result = _text_table(path, frame, source, why, target, text_column, task, fractions, common, classes)
    else:
        result = _table(path, frame, source, why, target, task, features, categorical, fractions, common, classes,
                        scaling)
    return dataclasses.replace(result, skipped=tuple(skipped) + tuple(result.skipped))


# ---------------------------------------------------------------- images


def _images(path, why, image_size, color_mode, task, fractions, common, classes=None) -> PathData:
    from zoo.data.image_folder import from_image_folder

    if task not in (None, "classification"):
        raise DataError(f"An image folder is read for classification; --task {task} does not apply.")
    inferences = [Inference("data", "image folder", why), Inference("task", "classification", "one class per subfolder",
                                                                     "")]
    class_names, files = list_image_splits(path, **fractions, seed=common["seed"], classes=classes)
    every = [f for split_files in files.values() for _, f in split_files]
    check = check_images(every)
    if len(check.skipped) == len(every):
        raise DataError(f"{path}: none of the {len(every)} image files can be read (e.g. {check.skipped[0][0]}: "
                        f"{check.skipped[0][1]}).")
    notes = []
    if image_size is None:
        image_size, reason = _infer_image_size(check.sizes)
        inferences.append(Inference("image size", f"{image_size[0]}x{image_size[1]}", reason, "--image-size HxW"))
    else:
        image_size = tuple(image_size)
    if len(check.sizes) > 1:
        notes.append(f"images come in {len(check.sizes)} sizes; every image is resized to "
                     f"{image_size[0]}x{image_size[1]} (bilinear), in training and in predictions")
    if color_mode is None:
        color_mode, reason = _infer_color_mode(check.modes)
        inferences.append(Inference("color mode", color_mode, reason, "--color-mode"))
    elif color_mode not in COLOR_MODES:
        from zoo.errors import UnknownNameError

        raise UnknownNameError("color mode", color_mode, COLOR_MODES)
    data = from_image_folder(path, image_size, color_mode=color_mode, on_error="skip", raw=True, classes=classes,
                             **fractions, **common)
    inferences.append(Inference("classes", data.class_names, "given" if classes else
                                f"{len(data.class_names)} subfolders, sorted", "--classes"))
    return PathData(path, "image", "classification", data, raw.ImageInput(image_size, COLOR_MODES[color_mode]),
                    data.class_names, None, tuple(inferences), data.skipped, tuple(notes))


def _infer_image_size(sizes: dict) -> tuple[tuple, str]:
    (w, h), n = max(sizes.items(), key=lambda kv: kv[1])  # Pillow sizes are (width, height)
    total = sum(sizes.values())
    reason = f"all {total} images are {h}x{w}" if len(sizes) == 1 else f"the most common of {len(sizes)} sizes " \
                                                                         f"({n} of {total} images)"
    if max(h, w) > MAX_IMAGE_SIDE:
        scale = MAX_IMAGE_SIDE / max(h, w)
        h2, w2 = max(int(round(h * scale)), 1), max(int(round(w * scale)), 1)
        return (h2, w2), f"{reason}, shrunk to at most {MAX_IMAGE_SIDE} px"
    return (h, w), reason


def _infer_color_mode(modes: dict) -> tuple[str, str]:
    gray = {"L", "1", "I", "I;16", "F", "LA"}
    if set(modes) <= gray:
        return "grayscale", "every image is single-channel"
    shown = ", ".join(f"{m} {n}" for m, n in sorted(modes.items(), key=lambda kv: -kv[1]))
    return "rgb", f"Pillow modes {shown}"


# ---------------------------------------------------------------- text


def _text_folder(path, why, task, fractions, common, classes=None) -> PathData:
    from zoo.data.labelled_text import from_text_folder

    if task not in (None, "classification"):
        raise DataError(f"A folder of text files is read for classification; --task {task} does not apply.")
    data = from_text_folder(path, classes=classes, **fractions, **common)
    return _text_result(path, data, [Inference("data", "text folder", why)], None)


def _text_table(path, frame, source, why, target, text_column, task, fractions, common, classes=None) -> PathData:
    from zoo.data.labelled_text import from_labelled_texts

    if task not in (None, "classification"):
        raise DataError(f"{source}: a text column is read for classification; --task {task} does not apply.")
    _require(frame, text_column, source, "text")
    target, target_why = _pick_target(frame, target, source, exclude=text_column)
    missing = frame[[text_column, target]].isna().any(axis=1).to_numpy()
    skipped = [(f"row {i} (line {i + 2})", "missing text or label") for i in np.flatnonzero(missing)]
    kept = _only_classes(frame[~missing], target, classes, source)
    data = from_labelled_texts(kept[text_column].astype(str).tolist(), kept[target].tolist(), name=source,
                               skipped=skipped, class_names=None if classes is None else tuple(classes),
                               **fractions, **common)
    inferences = [Inference("data", "table of texts", why, "--text-column"),
                  Inference("target", target, target_why, "--target")]
    return _text_result(path, data, inferences, target, text_column)


def _text_result(path, data, inferences, target, column=None) -> PathData:
    text_input = dataclasses.replace(raw.TextInput.fit(data.texts["train"]), column=column)
    inferences += [
        Inference("task", "classification", f"{len(data.class_names)} classes"),
        Inference("classes", data.class_names, "sorted label values", "--classes"),
        Inference("tokens", f"{len(text_input.vocabulary)} words, sequences of {text_input.sequence_length}",
                  "vocabulary of the train texts (at most 20000 words); length covers 95% of them"),
    ]
    return PathData(path, "text", "classification", data, text_input, data.class_names, target, tuple(inferences),
                    data.skipped)


# ---------------------------------------------------------------- tables


def _require(frame, column, source, role):
    if column not in frame.columns:
        columns = [str(c) for c in frame.columns]
        close = suggest(str(column), columns, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise DataError(f"{source} has no {role} column {column!r}.{hint} Columns: {', '.join(columns)}.")


def _pick_target(frame, target, source, exclude=None) -> tuple[str, str]:
    if target is not None:
        _require(frame, target, source, "target")
        return target, "given"
    named = _target_like(frame)
    if named is not None and named != exclude:
        return named, "named like a target"
    last = [c for c in frame.columns if c != exclude][-1]
    return last, "the last column"


def _infer_task(series, task) -> tuple[str, str]:
    import pandas as pd

    if task is not None:
        return task, "given"
    unique = series.nunique(dropna=True)
    if pd.api.types.is_bool_dtype(series) or not pd.api.types.is_numeric_dtype(series):
        return "classification", f"{unique} distinct text values"
    integral = pd.api.types.is_integer_dtype(series) or bool(np.all(np.mod(series.dropna(), 1) == 0))
    if integral and unique <= MAX_CLASSES:
        return "classification", f"{unique} distinct integer values"
    if integral:
        return "regression", f"{unique} distinct integer values (more than {MAX_CLASSES}: a quantity)"
    return "regression", "real-valued"


def _only_classes(frame, target, classes, source):
    """The rows whose target is one of `classes` (all rows when None); an unknown class gets close names."""
    if classes is None:
        return frame
    from zoo.data.image_folder import select_classes

    values = frame[target].astype(str)
    select_classes(list(classes), sorted(values.unique()), f"{source} (column {target!r})")
    return frame[values.isin(classes).to_numpy()]


def _table(path, frame, source, why, target, task, features, categorical, fractions, common,
           classes=None, scaling=None) -> PathData:
    import pandas as pd

    from zoo.data.tables import from_table, mixed_type_problem

    target, target_why = _pick_target(frame, target, source)
    task, task_why = _infer_task(frame[target], task)
    if classes is not None:
        if task != "classification":
            raise DataError(f"{source}: --classes applies to classification; the target {target!r} is read for "
                            f"{task}.")
        frame = _only_classes(frame, target, classes, source)
    if task == "forecast":
        raise DataError(f"{source}: forecasting needs a series (--horizon N and a time column).")
    values = frame[target].dropna().unique()
    if task == "classification" and len(values) < 2:
        raise DataError(f"{source}: the target column {target!r} has one value only ({values[0]!r}); a classifier "
                        "needs at least two classes.")
    if features is None:
        features = [c for c in frame.columns if c != target]
        features_why = "every other column"
    else:
        features = list(features)
        features_why = "given"
        for col in features:
            _require(frame, col, source, "feature")
    for col in features:
        problem = mixed_type_problem(frame[col])
        if problem and col not in (categorical or ()):
            raise DataError(f"{source}: column {col!r} mixes types: {problem}. Fix those values, or pass "
                            f"--categorical {col} to treat every value as a category.")
    if categorical is None:
        categorical = [c for c in features if not pd.api.types.is_numeric_dtype(frame[c])
                       and not pd.api.types.is_bool_dtype(frame[c])]
        cat_why = "non-numeric columns"
    else:
        categorical = list(categorical)
        cat_why = "given"
    frame = frame.copy()
    if task == "classification" and pd.api.types.is_float_dtype(frame[target]):
        whole = frame[target].dropna()
        frame[target] = frame[target].astype("Int64" if bool(np.all(np.mod(whole, 1) == 0)) else str)
    elif task == "regression":
        if not pd.api.types.is_numeric_dtype(frame[target]):
            raise DataError(f"{source}: --task regression needs a numeric target; {target!r} holds text.")
        frame[target] = frame[target].astype(np.float64)
    from zoo.data.table_scaling import SMOOTH_CLIP_BOUND

    scaling_why = "given" if scaling else "median and interquartile range, then smooth clipping (RealMLP-TD)"
    scaling = scaling or "robust"
    data = from_table(frame, features, target, categorical=categorical, stratify=task == "classification",
                      raw=True, name=source, scaling=scaling, **fractions, **common)
    stats = data.stats
    scale = None
    if task == "regression":
        y = np.concatenate([y for _, y in data.dataset("train", shuffle=False, batch_size=4096).as_numpy_iterator()])
        scale = (float(y.mean()), float(y.std() or 1.0))
    numbers = (tuple(float(v) for v in stats.mean), tuple(float(v) for v in stats.std)) if stats.numeric else ((), ())
    table_input = raw.TableInput(tuple(stats.numeric), *numbers, dict(stats.categories), scale, scaling,
                                 SMOOTH_CLIP_BOUND if scaling == "robust" else None)
    inferences = [
        Inference("data", "table", why),
        Inference("target", target, target_why, "--target"),
        Inference("task", task, task_why, "--task"),
        Inference("features", f"{len(features)} columns", features_why, "--features"),
        Inference("scaling", scaling, scaling_why, "--scaling"),
    ]
    if categorical:
        inferences.append(Inference("categorical", categorical, cat_why, "--categorical"))
    if task == "classification":
        inferences.append(Inference("classes", data.class_names, "the given ones, sorted" if classes else
                                    "sorted target values", "--classes"))
    return PathData(path, "table", task, data, table_input, data.class_names if task == "classification" else None,
                    target, tuple(inferences))


# ---------------------------------------------------------------- series


def _series(path, frame, source, why, target, time_column, horizon, window, task, fractions, common) -> PathData:
    import pandas as pd

    from zoo.data.timeseries import from_series, read_series

    if task not in (None, "forecast"):
        raise DataError(f"{source} is read as a series; --task {task} does not apply (drop --horizon/--time-column "
                        "to read it as a table).")
    values = read_series(frame, time_column, source=source)
    time_name = values.index.name
    numeric = [c for c in values.columns if pd.api.types.is_numeric_dtype(values[c])]
    if target is None:
        if not numeric:
            raise DataError(f"{source}: no numeric column to forecast besides the time column {time_name!r}.")
        target, target_why = (numeric[0], "the only numeric column") if len(numeric) == 1 else \
            (numeric[0], f"the first of {len(numeric)} numeric columns")
    else:
        _require(values, target, source, "target")
        target_why = "given"
    columns = [target] + [c for c in numeric if c != target]
    inferences = [Inference("data", "series", why), Inference("time column", time_name, "ordered in time",
                                                              "--time-column"),
                  Inference("target", target, target_why, "--target"), Inference("task", "forecast", "a series")]
    if horizon is None:
        horizon = 1
        inferences.append(Inference("horizon", 1, "the next step", "--horizon"))
    if window is None:
        window, reason = _infer_window(values.index, len(values), horizon)
        inferences.append(Inference("window", window, reason, "--window"))
    data = from_series(values[columns], window, horizon, targets=[target], name=source, raw=True,
                       **fractions, **common)
    series_input = raw.SeriesInput(window, horizon, tuple(map(str, columns)), str(target),
                                   tuple(float(v) for v in data.mean), tuple(float(v) for v in data.std),
                                   str(time_name))
    return PathData(path, "series", "forecast", data, series_input, None, str(target), tuple(inferences))


_FREQ_WINDOWS = {"h": (48, "hourly: two days"), "d": (28, "daily: four weeks"), "b": (20, "business days: four weeks"),
                 "w": (52, "weekly: a year"), "m": (24, "monthly: two years"), "q": (16, "quarterly: four years"),
                 "y": (16, "yearly: sixteen years"), "a": (16, "yearly: sixteen years")}


def _infer_window(index, length: int, horizon: int) -> tuple[int, str]:
    import pandas as pd

    window, reason = 24, "default"
    if isinstance(index, pd.DatetimeIndex) and len(index) >= 3:
        freq = pd.infer_freq(index[: min(len(index), 200)])
        if freq:
            key = freq.lstrip("0123456789").split("-")[0][:1].lower()
            window, reason = _FREQ_WINDOWS.get(key, (window, f"frequency {freq}"))
    limit = max((length - horizon) // 5, 1)  # leave every split room for whole windows
    if window > limit:
        return limit, f"{reason}, capped at a fifth of the {length} steps"
    return window, reason
