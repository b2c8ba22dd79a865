"""What reading your own data takes and gives: `ReadOptions` (passed whole), `Inference`, `PathData`.

`zoo.data.from_path` and `zoo train --data` read a path with one `ReadOptions`: every setting a
user may give about the data (target column, task, image size, held-out fractions, ...), each left
None to be inferred. The readers of `zoo.data.kinds` take it whole and return a `PathData`: the
splits, the fitted raw input, and every inference made, with its reason and the flag that
overrides it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from zoo.errors import UnknownNameError

if TYPE_CHECKING:  # an annotation only: the dry run reads data without the pipelines splits.py imports
    from zoo.data.splits import SplitData

TASKS = ("classification", "regression", "forecast")
VALIDATION_SPLIT, TEST_SPLIT = 0.1, 0.1


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """How to read data at a path; None everywhere means "infer it" (the defaults of `zoo.data.from_path`).

    Attributes:
        target: the column to predict (tables, series, texts in a table).
        task: "classification", "regression" or "forecast".
        features, categorical: a table's input columns, and those to one-hot encode.
        text_column: the column of texts in a table of texts.
        time_column, horizon, window: a series' time column, the steps to forecast, the steps a model sees.
        image_size, color_mode: what every image becomes, (height, width) and "grayscale"/"rgb"/"rgba".
        classes: only these classes, labelled in this order.
        scaling: a table's numeric columns: "robust" (median, interquartile range, smooth clipping; the
            default) or "standard" (mean, std); see `zoo.data.table_scaling`.
        validation_split, test_split: fractions held out (default `VALIDATION_SPLIT`, `TEST_SPLIT`).
        seed: draws the held-out rows (stratified by class), and seeds the training order.
        batch_size: examples per batch of the splits' batches.
    """

    target: Optional[str] = None
    task: Optional[str] = None
    features: Optional[tuple] = None
    categorical: Optional[tuple] = None
    text_column: Optional[str] = None
    time_column: Optional[str] = None
    horizon: Optional[int] = None
    window: Optional[int] = None
    image_size: Optional[tuple] = None
    color_mode: Optional[str] = None
    classes: Optional[tuple] = None
    scaling: Optional[str] = None
    validation_split: Optional[float] = None
    test_split: Optional[float] = None
    seed: int = 0
    batch_size: int = 32

    def __post_init__(self):
        if self.task is not None and self.task not in TASKS:
            raise UnknownNameError("task", self.task, TASKS)
        for name in ("features", "categorical", "classes"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        if self.classes is not None:
            object.__setattr__(self, "classes", tuple(str(c) for c in self.classes))
            if len(self.classes) < 2:
                from zoo.errors import DataError

                raise DataError(f"classes must name at least two classes, got {list(self.classes)}.")
        if self.image_size is not None:
            object.__setattr__(self, "image_size", tuple(self.image_size))

    @property
    def fractions(self) -> dict:
        """The held-out fractions with their defaults filled in, as the readers take them."""
        return {"validation_split": VALIDATION_SPLIT if self.validation_split is None else self.validation_split,
                "test_split": TEST_SPLIT if self.test_split is None else self.test_split}

    @property
    def common(self) -> dict:
        """What every reader takes: the seed and the batch size."""
        return {"seed": self.seed, "batch_size": self.batch_size}

    def replace(self, **changes) -> "ReadOptions":
        return dataclasses.replace(self, **changes)

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


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
    """What :func:`from_path` found and read; a `zoo.data.source.DataSource`, as a registered dataset is.

    Attributes:
        path: the path read.
        kind: the kind of data, a `zoo.data.kinds.DataKind` (it compares equal to its name, "image",
            "table", "text" or "series").
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

    # ------------------------------------------------------------------ `zoo.data.source.DataSource`
    follows_loss = True  # validation splits of a few dozen rows make accuracy a coarse, tied signal

    @property
    def name(self) -> str:
        return self.path

    def info(self):
        return self.dataset_info()

    def has(self, role: str) -> bool:
        return role in self.splits.parts

    def size(self, role: str) -> Optional[int]:
        return self.splits.num_examples.get(role)

    def batches(self, role: str, **batching):
        return self.splits.dataset(role, **batching)

    def backends(self) -> tuple:
        return self.kind.backends(self)

    def record(self) -> dict:
        return {"data": self.path, "kind": str(self.kind), "task": self.task, "reading": dict(self.reading),
                "export": self.export_data()}

    def export_data(self) -> dict:
        return {"path": self.path, "calibration_split": "train", "validation_split": "validation"}

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
    from zoo.data.batches import numpy_batches

    batches = numpy_batches(data.splits.dataset(split, shuffle=False, batch_size=4096))
    return np.concatenate([np.asarray(y, np.int64).reshape(-1) for _, y in batches])
