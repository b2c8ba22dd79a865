"""The data an export uses, by role: `ExportData(test=..., calibration=..., validation=...)`.

- **test**: what every artifact is verified on (parity with Keras on every output, int8 argmax
  agreement, accuracy where labelled) and what the report quotes; without it, random inputs;
- **calibration**: the inputs int8 calibrates its ranges on, from the training data;
- **validation**: what the int8 guards (`max_accuracy_drop`, `min_agreement`) measure on while they
  choose the layers that stay float: never the test data, which the report quotes, nor the
  calibration data, whose ranges int8 was fit to.

Each role is model input `x` or `(x, y)` (an array; a list or dict of arrays for several inputs), a
tf.data or any iterable of such batches, or a function of no arguments returning one: a function is
called only when the plan needs its role (calibration for int8, validation for a guard), so a source
can offer every role without reading what an export does not use. `from_dataset` and `from_path`
are such sources, what `zoo export --dataset` and `--data` use, and Python callers get the same:

    zoo.deploy.export.export(model, "exports/m", precision="int8", data=ExportData.from_dataset("mnist"))
    zoo.deploy.export.export(model, "exports/m", data="photos/")   # your own data, read as the model was trained
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

DEFAULT_SPLITS = {"test": "test", "calibration": "train", "validation": "train[-10%:]"}


def is_deferred(value) -> bool:
    """A role given as a function of no arguments (read only when needed)."""
    return callable(value) and not hasattr(value, "__iter__") and not hasattr(value, "shape")


@dataclasses.dataclass(frozen=True)
class ExportData:
    """The data of an export, by role (see the module docstring)."""

    test: Any = None
    calibration: Any = None
    validation: Any = None
    max_test_samples: int | None = None  # use at most this many test examples
    description: str | None = None  # how the report names the test data, e.g. "mnist test split"

    def __post_init__(self):
        limit = self.max_test_samples
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"max_test_samples must be a positive integer. Received: max_test_samples={limit!r}")

    @property
    def empty(self) -> bool:
        """No data of any role (a test-sample limit alone, say)."""
        return self.test is None and self.calibration is None and self.validation is None

    def role(self, name: str):
        """The data of role `name`, a deferred role read now."""
        value = getattr(self, name)
        return value() if is_deferred(value) else value

    @classmethod
    def of(cls, data, model=None) -> "ExportData":
        """`data` as `ExportData`: one already; None (no data); a registered dataset's name (`from_dataset`); or
        the path of your own data, read as `model` was trained on it (`from_path`)."""
        if data is None:
            return cls()
        if isinstance(data, ExportData):
            return data
        if isinstance(data, (str, os.PathLike)):
            if os.path.exists(os.fspath(data)):
                return cls.from_path(data, model)
            return cls.from_dataset(os.fspath(data))
        raise TypeError(f"data must be ExportData, a dataset name or the path of your own data. Received: "
                        f"{type(data).__name__}. For arrays or batches, say which role they play: "
                        "ExportData(test=..., calibration=..., validation=...).")

    @classmethod
    def from_dataset(cls, name: str, *, test_split: str = DEFAULT_SPLITS["test"],
                     calibration_split: str = DEFAULT_SPLITS["calibration"],
                     validation_split: str = DEFAULT_SPLITS["validation"], data_dir=None,
                     max_test_samples: int | None = None) -> "ExportData":
        """A registered (or TFDS) dataset as `zoo.data.load` reads it: its test split for the test role, its
        train split for calibration, the end of the train split for the int8 guards' validation."""

        def load(split, batch_size, **kwargs):
            def read():
                import zoo.data

                return zoo.data.load(name, split, batch_size=batch_size, data_dir=data_dir, **kwargs)

            return read

        return cls(test=load(test_split, 1000), calibration=load(calibration_split, 100, seed=0),
                   validation=load(validation_split, 1000), max_test_samples=max_test_samples,
                   description=f"{name} {test_split} split")

    @classmethod
    def from_path(cls, path, model, *, max_test_samples: int | None = None, calibration_split: str = "train",
                  validation_split: str = "validation") -> "ExportData":
        """Your own data (what `zoo train --data` read), read as `model` was trained on it (its metadata records
        how): its test split (the examples training reported on) for the test role, its train split for
        calibration, its validation split for the int8 guards. The two splits may be any of the data's own
        (`train`, `validation`, `all`; e.g. `validation_split="train"` where the validation split holds fewer
        inputs than `min_agreement` needs: agreement with the float model needs no held-out labels)."""
        import numpy as np

        from zoo.deploy.artifacts.validation import labelled_batches
        from zoo.errors import DataError
        from zoo.deploy.formats.metadata import of_model

        meta = None if model is None else of_model(model)
        if meta is None:
            raise DataError(f"data={os.fspath(path)!r}: the model has no zoo metadata (train it with `zoo train "
                            "--data`); for a registered dataset give its name.")
        path = os.fspath(path)

        def arrays(split):
            batches, _, split, _ = labelled_batches(meta, path, split, batch_size=1000)
            xs, ys = zip(*batches)
            return (np.concatenate(xs), np.concatenate(ys)), split

        test, split = arrays(None)
        return cls(test=test, calibration=lambda: arrays(calibration_split)[0][0],
                   validation=lambda: arrays(validation_split)[0],
                   max_test_samples=max_test_samples, description=f"{path} {split} split")

    @classmethod
    def from_run(cls, run, model, *, max_test_samples: int | None = None) -> "ExportData | None":
        """The data `model` was trained on, read again as it was, or None where nothing records any.

        First found: the run folder's record of how an export reads its data (`run` a `zoo.run_dir.RunDir`, a
        path, or None; `zoo.data.DataSource.export_data`, recorded by `zoo train`: a registered dataset's name
        and splits for `from_dataset`, or your data's path for `from_path`); then, for a model without its run
        folder, the model's own record of the path it was trained on (its metadata), read by `from_path`.

        Raises:
            DataError: the recorded path is not there any more.
        """
        from zoo.deploy.formats.metadata import of_model
        from zoo.errors import DataError
        from zoo.run_dir import RunDir

        how = dict(((RunDir(run).read().get("data") or {}).get("export") or {}) if run is not None else {})
        meta = None if model is None or how else of_model(model)
        if meta is not None and (meta.source or {}).get("data"):
            how = {"path": meta.source["data"]}
        if "dataset" in how:
            return cls.from_dataset(how.pop("dataset"), **how, max_test_samples=max_test_samples)
        if "path" in how:
            path = how.pop("path")
            if not os.path.exists(path):
                raise DataError(f"{model.name} was trained on {path}, which is not there any more; give the data to "
                                "use (--data PATH or --dataset NAME, or data= in Python).")
            return cls.from_path(path, model, **how, max_test_samples=max_test_samples)
        return None
