"""`zoo val ARTIFACT --data PATH_OR_DATASET` and `zoo.val(...)`: the task metric, measured in the artifact's runtime.

    report = zoo.val("exports/convnet_bn/convnet_bn_float32.onnx", "digits/")   # a folder, a CSV, a series
    report = zoo.val("saved_models/convnet_bn", "mnist")                # or a registered dataset
    print(report.table()); report.write("val/")                         # report.json, report.md, a PNG

Classifiers get accuracy, per-class precision, recall and F1, and a confusion matrix (PNG);
regressors and forecasters get MAE and RMSE in the target's units and a residual plot (PNG).

Which examples: a path is read with the same reading the model was trained with (its metadata
records it: target column, image size, window, seed and held-out fractions). ``split="test"``
(the default where the data has one: a ``test/`` folder, or the training data itself, whose
test rows are drawn again with the same seed) gives exactly the examples ``zoo train`` reported
its test metric on; ``split="all"`` takes every example. A registered dataset is read with
``zoo.data.load`` (default split "test"), as ``zoo export --dataset`` reads it, so the numbers are
the export report's.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

from zoo.deploy.artifacts.artifact import Artifact, load
from zoo.errors import DataError, suggest
from zoo.image_files import split_folders

SPLITS = ("test", "validation", "train", "all")


@dataclasses.dataclass
class ValReport:
    """What `val` measured. ``metrics``: accuracy, or mae and rmse; ``per_class`` rows for classifiers;
    ``confusion[i, j]``: examples of class i predicted as j."""

    artifact: str
    kind: str
    runtime: str
    task: str
    data: str
    split: str
    examples: int
    metrics: dict
    class_names: Optional[tuple] = None
    per_class: list = dataclasses.field(default_factory=list)
    confusion: Optional[np.ndarray] = None
    predictions: Optional[np.ndarray] = None  # what was compared: class indices or values
    targets: Optional[np.ndarray] = None
    plot: Optional[str] = None

    def table(self) -> str:
        lines = [f"{self.artifact} ({self.kind}, {self.runtime})",
                 f"data: {self.data}, split {self.split}: {self.examples} examples"]
        for k, v in self.metrics.items():
            lines.append(f"{k}: {v:.4f}" + (f" ({v:.2%})" if k == "accuracy" else ""))
        if self.per_class:
            width = max(len(r["class"]) for r in self.per_class)
            lines.append(f"{'class':<{width}}  precision  recall     f1  support")
            for r in self.per_class:
                lines.append(f"{r['class']:<{width}}  {r['precision']:9.4f}  {r['recall']:6.4f}  {r['f1']:5.4f}  "
                             f"{r['support']:7d}")
        if self.plot:
            lines.append(f"plot: {self.plot}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("artifact", "kind", "runtime", "task", "data", "split", "examples",
                                           "metrics", "per_class", "plot")}
        d["class_names"] = None if self.class_names is None else list(self.class_names)
        d["confusion"] = None if self.confusion is None else self.confusion.tolist()
        return d

    def write(self, out_dir) -> Path:
        """Writes report.json, report.md and the plot (confusion matrix or residuals) into `out_dir`."""
        from zoo.fileio import atomic_write_text, ensure_dir

        out = ensure_dir(out_dir)
        self.plot = _plot(self, out)
        atomic_write_text(out / "report.json", json.dumps(self.to_dict(), indent=2, default=str) + "\n")
        md = ["# Validation", "", "```", self.table(), "```", ""]
        if self.plot:
            md += [f"![{Path(self.plot).stem}]({Path(self.plot).name})", ""]
        atomic_write_text(out / "report.md", "\n".join(md))
        return out


def val(artifact, data, *, split: Optional[str] = None, batch_size: int = 256, data_dir=None) -> ValReport:
    """Measures `artifact` (a path or an opened `Artifact`) on `data`: a path, a dataset name, or `(x, y)`
    arrays of what the artifact takes (its raw input) and the labels or targets.

    Arrays, and an image classifier's folder split that is a folder of its own (`test/`, or every image of a
    folder of class folders), are read with NumPy and Pillow (`image_folder_batches`), so `val` of a TFLite, ONNX
    or OpenVINO artifact on them imports neither TensorFlow nor Keras; other paths (tables, texts, series, a
    split drawn by seed) and datasets are read by `zoo.data`, which imports TensorFlow.
    """
    if split is not None and split not in SPLITS and not isinstance(split, str):
        raise ValueError(f"split must be one of {SPLITS} or a dataset split spec. Received: split={split!r}")
    art = artifact if isinstance(artifact, Artifact) else load(artifact)
    meta = art.metadata
    if isinstance(data, tuple) and len(data) == 2 and not isinstance(data[0], str):
        batches, description, split = _array_batches(data, batch_size), "given arrays", split or "all"
        class_names = meta.class_names if meta else None
    elif isinstance(data, (str, os.PathLike)) and os.path.exists(os.fspath(data)):
        if meta is None:
            raise DataError(f"{art.path} has no zoo metadata, so zoo cannot tell how to read {data}; validate it on "
                            "a registered dataset (--data mnist) or on a model trained with `zoo train --data`.")
        read = image_folder_batches(meta, os.fspath(data), split, batch_size)  # Pillow: no TensorFlow
        batches, description, split, class_names = read or labelled_batches(meta, os.fspath(data), split, batch_size)
    elif isinstance(data, str):
        batches, description, split, class_names = _dataset_batches(art, data, split, batch_size, data_dir)
    else:
        raise DataError(f"data must be a path, a dataset name or (x, y) arrays; {data!r} is none of them (no such "
                        "file or folder).")
    predictions, targets = [], []
    for x, y in batches:
        predictions.append(art.predict(x))
        targets.append(np.asarray(y))
    if not predictions:
        raise DataError(f"{description}: split {split!r} has no examples.")
    outputs, y = np.concatenate(predictions), np.concatenate(targets)
    scores = outputs.ndim == 2 and outputs.shape[1] > 1 and y.dtype.kind in "iu"  # class scores and class labels
    task = meta.task if meta else ("classification" if class_names is not None or scores else "regression")
    report = ValReport(str(art.path), art.kind, art.runtime, task, description, split, len(y), {}, class_names)
    if task == "classification":
        _classification(report, outputs, y)
    else:
        _regression(report, outputs, y)
    return report


def _array_batches(data, batch_size: int):
    """Batches of `(x, y)` arrays (`x` an array or a dict of them by input name)."""
    x, y = data
    y = np.asarray(y)
    for start in range(0, len(y), batch_size):
        part = {k: np.asarray(v)[start:start + batch_size] for k, v in x.items()} if isinstance(x, dict) \
            else np.asarray(x)[start:start + batch_size]
        yield part, y[start:start + batch_size]


def labelled_batches(meta, path: str, split: Optional[str] = None, batch_size: int = 256):
    """``(batches of (raw x, label index or value), description, split, class names)`` of the data at
    `path`, read as the model with metadata `meta` was trained (see the module docstring)."""
    from zoo.data.path_data import from_path

    reading = dict(meta.source.get("reading") or {})
    same_data = os.path.abspath(path) == os.path.abspath(meta.source.get("data", "")) if meta.source.get("data") \
        else False
    reading = reading if same_data else {k: v for k, v in reading.items()
                                         if k not in ("validation_split", "test_split")}
    if split is None:
        split = "test" if same_data else None
    if split == "all":
        reading.update(validation_split=0.0, test_split=0.0)
    data = from_path(path, **reading)
    if split is None:
        split = "test" if "test" in data.splits.parts and _has_test_folder(path) else "all"
        if split == "all":
            data = from_path(path, **{**reading, "validation_split": 0.0, "test_split": 0.0})
    part = "train" if split == "all" else split
    if part not in data.splits.parts:
        raise DataError(f"{path} has no {split!r} split here (it has {', '.join(data.splits.parts)}); "
                        f"use --split {' or '.join(sorted(data.splits.parts))} or all.")
    mapping = _class_mapping(meta.class_names, data.class_names, path) if meta.task == "classification" else None
    ds = data.splits.dataset(part, shuffle=False, batch_size=batch_size)

    def batches():
        for x, y in ds.as_numpy_iterator():
            yield x, (mapping[y] if mapping is not None else y)

    return batches(), path, split, meta.class_names if meta.task == "classification" else None


def image_folder_batches(meta, path: str, split: Optional[str] = None, batch_size: int = 256):
    """What `labelled_batches` gives for an image classifier's folder, read with Pillow (`zoo.deploy.artifacts.reading`),
    so `zoo val model.tflite --data FOLDER` imports neither TensorFlow nor Keras; None where the examples must be
    drawn by seed from the training images (a test or validation fraction: `zoo.data` reads them).

    Read here: a split's own folder (`test/`, `validation/` or `val/`; `train/` only when the model was not
    trained on this folder, which holds out no fraction of it), or every image of a folder of class subfolders
    without split folders (``split="all"``, or the default for a folder the model was not trained on)."""
    from zoo.deploy.artifacts import reading
    from zoo.deploy.artifacts.prediction import _client_side

    if meta.input.get("kind") != "image" or meta.task != "classification" or not os.path.isdir(path):
        return None
    same_data = bool(meta.source.get("data")) and os.path.abspath(path) == os.path.abspath(meta.source["data"])
    folders = split_folders(path)
    if folders:
        wanted = split or ("test" if same_data or "test" in folders else "all")
        if wanted not in folders or (wanted == "train" and same_data):
            return None
        folder = folders[wanted]
    else:
        wanted = split or ("test" if same_data else "all")
        if wanted != "all":
            return None
        folder = path
    data_classes, files = reading.labelled_image_files(folder, (meta.source.get("reading") or {}).get("classes"))
    mapping = _class_mapping(meta.class_names, data_classes, path)
    index = {c: i for i, c in enumerate(data_classes)}
    size, channels = tuple(meta.input["image_size"]), int(meta.input["channels"])

    def batches():
        for start in range(0, len(files), batch_size):
            part = files[start:start + batch_size]
            pixels = reading.read_images([f for _, f in part], size, channels)
            yield _client_side(meta.input, pixels), mapping[np.array([index[c] for c, _ in part], np.int64)]

    return batches(), path, wanted, meta.class_names


def _has_test_folder(path: str) -> bool:
    return os.path.isdir(path) and "test" in split_folders(path)


def _class_mapping(model_classes, data_classes, path) -> np.ndarray:
    """Data label index -> model class index, matching by name; an unknown class is an error."""
    index = {c: i for i, c in enumerate(model_classes)}
    unknown = [c for c in data_classes if c not in index]
    if unknown:
        close = suggest(unknown[0], list(model_classes), n=3)
        raise DataError(f"{path} has class(es) {unknown[:5]} the model does not know (did you mean: "
                        f"{', '.join(close)}?). The model's classes: {', '.join(model_classes)}.")
    return np.array([index[c] for c in data_classes], np.int64)


def _dataset_batches(art: Artifact, name: str, split, batch_size, data_dir):
    """Batches of a registered (or TFDS) dataset, as `zoo export --dataset` reads them."""
    import zoo.data

    split = split or "test"
    meta = art.metadata
    kind = meta.input.get("kind") if meta else None
    if kind not in (None, "image"):
        raise DataError(f"Dataset {name!r} is fed to models in zoo's preprocessed form; {art.path} takes raw "
                        f"{kind} input. Validate it on the file it reads: --data PATH.")
    scale = 255.0 if kind == "image" else 1.0  # zoo's image pipelines give [0, 1]; such models take 0-255
    info = zoo.data.dataset_info(name, data_dir=data_dir)
    ds = zoo.data.load(name, split, batch_size, data_dir=data_dir, shuffle=False)
    class_names = meta.class_names if meta and meta.class_names else (
        tuple(str(i) for i in range(info.num_classes)) if info.num_classes else None)

    def batches():
        # a tf.data pipeline, or where TensorFlow is not installed a keras.utils.PyDataset (zoo.data.array_batches)
        items = ds.as_numpy_iterator() if hasattr(ds, "as_numpy_iterator") else (ds[i] for i in range(len(ds)))
        for x, y in items:
            yield x * scale if scale != 1.0 else x, y

    return batches(), f"dataset {name}", split, class_names


def _classification(report: ValReport, outputs: np.ndarray, y: np.ndarray) -> None:
    k = outputs.shape[-1]
    names = report.class_names or tuple(str(i) for i in range(k))
    predicted = np.argmax(outputs.reshape(len(y), -1), axis=-1)
    y = y.astype(np.int64).reshape(-1)
    confusion = np.zeros((k, k), np.int64)
    np.add.at(confusion, (y, predicted), 1)
    report.metrics["accuracy"] = float(np.mean(predicted == y))
    for i, name in enumerate(names):
        tp = confusion[i, i]
        predicted_i, actual_i = confusion[:, i].sum(), confusion[i].sum()
        precision = tp / predicted_i if predicted_i else 0.0
        recall = tp / actual_i if actual_i else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        report.per_class.append({"class": name, "precision": float(precision), "recall": float(recall),
                                 "f1": float(f1), "support": int(actual_i)})
    report.class_names = tuple(names)
    report.confusion, report.predictions, report.targets = confusion, predicted, y


def _regression(report: ValReport, outputs: np.ndarray, y: np.ndarray) -> None:
    predicted = outputs.reshape(y.shape).astype(np.float64)
    errors = predicted - y.astype(np.float64)
    report.metrics["mae"] = float(np.mean(np.abs(errors)))
    report.metrics["rmse"] = float(np.sqrt(np.mean(errors ** 2)))
    report.predictions, report.targets = predicted, y.astype(np.float64)


def _plot(report: ValReport, out: Path) -> Optional[str]:
    """The confusion matrix or the residual plot as a PNG in `out`; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from zoo.fileio import atomic_path

    if report.confusion is not None:
        k = len(report.class_names)
        fig, ax = plt.subplots(figsize=(min(2 + 0.6 * k, 14), min(1.6 + 0.6 * k, 13)))
        ax.imshow(report.confusion, cmap="Blues")
        if k <= 30:
            ax.set_xticks(range(k), report.class_names, rotation=45 if k > 6 else 0, ha="right" if k > 6 else "center")
            ax.set_yticks(range(k), report.class_names)
            top = report.confusion.max() or 1
            for i in range(k):
                for j in range(k):
                    v = report.confusion[i, j]
                    ax.text(j, i, str(v), ha="center", va="center", fontsize=8,
                            color="white" if v > top / 2 else "black")
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        ax.set_title(f"accuracy {report.metrics['accuracy']:.2%} ({report.examples} examples)")
        name = "confusion_matrix.png"
    else:
        p, t = report.predictions.reshape(-1), report.targets.reshape(-1)
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        a1.scatter(p, p - t, s=6, alpha=0.6)
        a1.axhline(0, color="black", linewidth=0.8)
        a1.set_xlabel("predicted")
        a1.set_ylabel("predicted - true")
        a2.hist(p - t, bins=40)
        a2.set_xlabel("residual")
        fig.suptitle(f"MAE {report.metrics['mae']:.4g}, RMSE {report.metrics['rmse']:.4g} ({report.examples} examples)")
        name = "residuals.png"
    fig.tight_layout()
    with atomic_path(out / name) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return str(out / name)
