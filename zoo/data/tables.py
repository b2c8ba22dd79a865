"""Tables (a CSV file or a pandas DataFrame) as ``(features, target)`` pipelines.

    data = zoo.data.from_table("houses.csv", features=["rooms", "area", "town"], target="price",
                               categorical=["town"], validation_split=0.2, seed=0)
    model.fit(data.train, validation_data=data.validation)
    test = zoo.data.from_table("houses_test.csv", features=..., target="price",
                               categorical=["town"], stats=data.stats)   # the train statistics

Column roles: `features` (numeric columns become float32; `categorical` ones
are one-hot encoded with the categories seen in training) and one `target`
(integer, boolean or text targets are class labels, int32; float targets are
regression values, float32). Standardization statistics (mean, std) and the
categories are fitted on the training rows only and exposed as ``data.stats``;
pass them as ``stats=`` to prepare any other table the same way.

``raw=True`` fits the same statistics but leaves the values as read: x is the
float32 matrix of numeric columns, or, with categorical columns, a dict
``{"categorical": string (n, m), "numeric": float32 (n, k)}``, for a model that
carries its own ``Normalization`` and ``StringLookup`` (``zoo.data.raw_input``).

Files: CSV (comma-separated, a header row first) and Parquet when pyarrow is
installed. CSV lines that cannot be parsed (a wrong
number of fields) are skipped and listed in ``data.skipped`` with their line
number and reason. Bad input raises :class:`zoo.errors.DataError` naming the file
and column: a missing column (with close names), a non-numeric or missing value
(with its row and CSV line), a mixed-type column, an empty table.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Sequence

import numpy as np

from zoo.data import splits as splits_lib
from zoo.data.batches import Batching, takes_batching, uses_tf_data
from zoo.data.memory import Arrays
from zoo.data.splits import SplitData
from zoo.errors import DataError, suggest

SCALINGS = ("standard", "robust")


@dataclasses.dataclass(frozen=True, eq=False)
class TableStats:
    """How table columns become model inputs, fitted on training rows.

    Attributes:
        numeric: numeric feature columns, in input order.
        mean, std: per numeric column, the centre and scale (std 1 where a column is constant);
            None when not standardizing. With ``scaling="robust"`` the median and robust spread
            (:func:`zoo.data.table_scaling.fit_robust_scaling`).
        categories: categorical column -> its categories (one-hot order).
        classes: target class values (label i is ``classes[i]``), or None for
            a numeric (regression) target.
    """

    numeric: tuple
    mean: Optional[np.ndarray]
    std: Optional[np.ndarray]
    categories: dict
    classes: Optional[tuple]
    scaling: str = "standard"

    @property
    def feature_names(self) -> list[str]:
        """Names of the model's input features: numeric columns, then ``column=category`` one-hots."""
        return list(self.numeric) + [f"{col}={cat}" for col, cats in self.categories.items() for cat in cats]

    def to_dict(self) -> dict:
        """JSON-serializable form (see :meth:`from_dict`)."""
        return {
            "numeric": list(self.numeric),
            "mean": None if self.mean is None else self.mean.tolist(),
            "std": None if self.std is None else self.std.tolist(),
            "categories": {k: list(v) for k, v in self.categories.items()},
            "classes": None if self.classes is None else list(self.classes),
            "scaling": self.scaling,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "TableStats":
        as_array = lambda v: None if v is None else np.asarray(v, np.float64)  # noqa: E731
        return cls(
            numeric=tuple(d["numeric"]),
            mean=as_array(d["mean"]),
            std=as_array(d["std"]),
            categories={k: tuple(v) for k, v in d["categories"].items()},
            classes=None if d["classes"] is None else tuple(d["classes"]),
            scaling=d.get("scaling", "standard"),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class TableData(SplitData):
    """A table's splits plus ``stats`` (fitted on train), ``feature_names``, ``target``, ``class_names``."""

    stats: Optional[TableStats] = None
    feature_names: tuple = ()
    target: str = ""
    class_names: Optional[tuple] = None
    skipped: tuple = ()


@takes_batching(batch_size=128, seed=0)
def from_table(
    table,
    features: Optional[Sequence[str]] = None,
    target: Optional[str] = None,
    *,
    categorical: Sequence[str] = (),
    standardize: bool = True,
    scaling: str = "standard",
    stats: Optional[TableStats] = None,
    validation_split: float = 0.0,
    test_split: float = 0.0,
    stratify: bool = True,
    raw: bool = False,
    name: Optional[str] = None,
    batching: Batching,
) -> TableData:
    """A CSV (or Parquet) file or DataFrame as batched ``(x, y)`` splits; see the module docstring.

    Args:
        table: path of a CSV file (with a header row) or a ``pandas.DataFrame``.
        features: input columns; None means every column except `target`.
        target: the column to predict.
        categorical: feature columns to one-hot encode (text or integer codes).
        standardize: scale numeric features using the training rows' statistics.
        scaling: how: ``"standard"`` (zero mean, unit variance) or ``"robust"`` (median and
            interquartile range, RealMLP-TD's; see :mod:`zoo.data.table_scaling`).
        stats: statistics from an earlier ``from_table(...).stats``; when given,
            nothing is fitted here (use it for a separate test table).
        validation_split, test_split: fractions of rows held out, drawn with
            `seed`, stratified by class for class targets when `stratify`.
            With both 0 every row is in ``"train"``. `batching.seed` draws them (and orders the epochs).
        raw: fit the statistics but feed the values as read (see the module docstring).
        name: what errors call a DataFrame (e.g. the file it was read from).

    Returns:
        :class:`TableData`: ``.train`` / ``.validation`` / ``.test`` pipelines
        (x float32 ``(batch, n_features)``, y int32 labels or float32 values),
        ``.stats``, ``.feature_names``, ``.class_names``.
    """
    frame, source, skipped = read_table(table, with_skipped=True)
    source = name or source
    features, target = _check_columns(frame, features, target, source)
    categorical = _check_categorical(categorical, features, source)
    if stats is not None and not isinstance(stats, TableStats):
        raise TypeError(f"stats must be a TableStats (from_table(...).stats), got {type(stats).__name__}.")
    fractions = {"validation": validation_split, "test": test_split}
    splits_lib.validate_fractions(fractions)
    if scaling not in SCALINGS:
        from zoo.errors import UnknownNameError

        raise UnknownNameError("scaling", scaling, SCALINGS)

    numeric_cols = [c for c in features if c not in categorical]
    numeric = np.stack([numeric_column(frame, c, source) for c in numeric_cols], axis=1) if numeric_cols else None
    text = {c: _category_column(frame, c, source) for c in categorical}
    classes = stats.classes if stats is not None else _infer_classes(frame, target, source)
    y = _target_values(frame, target, classes, source)

    labels = y if (classes is not None and stratify) else None
    rows = splits_lib.random_split(len(frame), fractions, seed=batching.seed or 0, labels=labels)
    if stats is None:
        train = rows[splits_lib.TRAIN]
        if len(train) == 0:
            raise DataError(f"{source}: no rows left for training after holding out {fractions}.")
        mean = std = None
        if standardize and numeric is not None and scaling == "robust":
            from zoo.data.table_scaling import fit_robust_scaling  # imports Keras, for its layer

            mean, std = fit_robust_scaling(numeric[train])
        elif standardize and numeric is not None:
            mean = numeric[train].mean(axis=0)
            std = numeric[train].std(axis=0)
            std = np.where(std > 0, std, 1.0)
        categories = {c: tuple(sorted(set(text[c][train]))) for c in categorical}
        stats = TableStats(tuple(numeric_cols), mean, std, categories, classes, scaling)
    elif list(stats.numeric) != numeric_cols or list(stats.categories) != list(categorical):
        raise DataError(
            f"{source}: stats were fitted on numeric columns {list(stats.numeric)} and categorical "
            f"{list(stats.categories)}, but this table uses {numeric_cols} and {list(categorical)}."
        )

    if raw:
        x = numeric.astype(np.float32) if numeric is not None else np.zeros((len(frame), 0), np.float32)
        if categorical:
            x = {"categorical": np.stack([text[c] for c in categorical], axis=1).astype(object), "numeric": x}
        input_shape = (len(numeric_cols),)
    else:
        x = _transform(stats, numeric, text)
        input_shape = (x.shape[1],)
    take = (lambda a, idx: {k: v[idx] for k, v in a.items()}) if isinstance(x, dict) else (lambda a, idx: a[idx])
    parts = {name: _dataset(take(x, idx), y[idx]) for name, idx in rows.items() if len(idx)}
    return TableData(
        name=source,
        parts=parts,
        input_shape=input_shape,
        num_classes=None if classes is None else len(classes),
        batching=batching,
        stats=stats,
        feature_names=tuple(stats.feature_names),
        target=target,
        class_names=None if classes is None else tuple(str(c) for c in classes),
        skipped=tuple(skipped),
    )


def _dataset(x, y):
    if isinstance(x, dict):
        x = {k: (v.astype(str) if v.dtype == object else v) for k, v in x.items()}
        if not uses_tf_data():  # strings stay NumPy; a model taking them trains on TensorFlow only
            return Arrays((x, y)), len(y)
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices((x, y)), len(y)
    return splits_lib.arrays_dataset(x, y)


PARQUET_SUFFIXES = (".parquet", ".pq")


def read_table(table, with_skipped: bool = False):
    """``(DataFrame, source description)`` for a CSV or Parquet path or a DataFrame; rejects empty
    tables. With `with_skipped`, also the CSV lines left out: ``[(where, reason)]``."""
    import pandas as pd

    skipped = []
    if isinstance(table, pd.DataFrame):
        frame, source = table, "table"
    elif isinstance(table, (str, os.PathLike)):
        path = os.fspath(table)
        parquet = path.lower().endswith(PARQUET_SUFFIXES)
        source = f"{'Parquet' if parquet else 'CSV'} file {path}"
        if not os.path.isfile(path):
            raise DataError(f"{source} does not exist." if not os.path.exists(path) else f"{path} is not a file.")
        frame = _read_parquet(path, source) if parquet else _read_csv(path, source, skipped)
    else:
        raise TypeError(f"table must be a CSV path or a pandas DataFrame, got {type(table).__name__}.")
    if len(frame) == 0:
        raise DataError(f"{source} has no data rows, only the header (columns: {', '.join(map(str, frame.columns))}).")
    return (frame, source, skipped) if with_skipped else (frame, source)


def _read_csv(path: str, source: str, skipped: list):
    """The CSV as a DataFrame; lines with the wrong number of fields are appended to `skipped`."""
    import pandas as pd

    try:
        try:
            return pd.read_csv(path)
        except pd.errors.ParserError:
            # Only the python engine reports each bad line; it is slower, so it is the fallback.
            with open(path, encoding="utf-8") as f:
                width = len(next(iter(f)).split(","))

            def bad_line(fields):
                skipped.append((f"a line with {len(fields)} fields", f"expected {width} fields: {fields[:6]}"))
                return None

            frame = pd.read_csv(path, engine="python", on_bad_lines=bad_line)
            _number_bad_lines(path, width, skipped)
            return frame
    except pd.errors.EmptyDataError as e:
        raise DataError(f"{source} is empty (no header row, no data).") from e
    except UnicodeDecodeError as e:
        raise DataError(f"{source} is not valid UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8.") from e
    except pd.errors.ParserError as e:
        raise DataError(f"{source} cannot be parsed as CSV: {e}") from e


def _number_bad_lines(path: str, width: int, skipped: list) -> None:
    """Replaces the python engine's anonymous bad-line entries with their line numbers, where the
    file can be re-read line by line (no quoted newlines)."""
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        bad = [(i, row) for i, row in enumerate(csv.reader(f), start=1) if row and len(row) != width]
    if len(bad) == len(skipped):
        skipped[:] = [(f"line {i}", f"{len(row)} fields, expected {width}") for i, row in bad]


def _read_parquet(path: str, source: str):
    import pandas as pd

    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise DataError(f"{source}: reading Parquet needs pyarrow (`pip install pyarrow`).") from None
    try:
        return pd.read_parquet(path)
    except Exception as e:  # pyarrow raises ArrowInvalid, OSError, ... for damaged files
        raise DataError(f"{source} cannot be read as Parquet: {type(e).__name__}: {e}") from e


def mixed_type_problem(series) -> Optional[str]:
    """Why a text column looks like a numeric one with some bad values, or None.

    A column where most non-missing values parse as numbers but some do not
    (``"n/a"``, ``"12,5"``) is almost always a data error, not a category.
    """
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        return None
    present = series.dropna()
    if present.empty:
        return None
    numeric = pd.to_numeric(present, errors="coerce")
    good = int(numeric.notna().sum())
    bad = present[numeric.isna()]
    if good >= 0.5 * len(present) and len(bad):
        examples = ", ".join(repr(v) for v in pd.unique(bad.astype(str))[:3])
        return f"{good} numeric and {len(bad)} non-numeric value(s) (e.g. {examples} at row {bad.index[0]})"
    return None


def _check_columns(frame, features, target, source):
    columns = [str(c) for c in frame.columns]
    if not isinstance(target, str) or not target:
        raise ValueError(f"target must be a column name, got {target!r}. Columns of {source}: {', '.join(columns)}.")
    _require_column(frame, target, source, "target")
    if features is None:
        features = [c for c in frame.columns if c != target]
    elif isinstance(features, str) or not all(isinstance(f, str) for f in features):
        raise ValueError(f"features must be a list of column names, got {features!r}.")
    features = list(features)
    if not features:
        raise ValueError(f"features is empty: name at least one input column of {source}.")
    for col in features:
        _require_column(frame, col, source, "feature")
    if target in features:
        raise ValueError(f"Column {target!r} is both a feature and the target.")
    duplicates = sorted({c for c in features if features.count(c) > 1})
    if duplicates:
        raise ValueError(f"features lists column(s) {duplicates} more than once.")
    return features, target


def _require_column(frame, col, source, role):
    if col not in frame.columns:
        columns = [str(c) for c in frame.columns]
        close = suggest(col, columns, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise DataError(f"{source} has no {role} column {col!r}.{hint} Columns: {', '.join(columns)}.")


def _check_categorical(categorical, features, source):
    if isinstance(categorical, str):
        raise ValueError(f"categorical must be a list of column names, got the string {categorical!r}.")
    categorical = list(categorical or ())
    for col in categorical:
        if col not in features:
            raise ValueError(f"categorical column {col!r} of {source} is not one of the features {features}.")
    return categorical


def _row_label(frame, position: int, source: str) -> str:
    if source.startswith("CSV file") and isinstance(frame.index, __import__("pandas").RangeIndex):
        return f"row {position} (line {position + 2} of the file)"  # line 1 is the header
    return f"row {frame.index[position]!r}"


def numeric_column(frame, col, source) -> np.ndarray:
    """Column `col` as float64, or a DataError naming the first non-numeric or missing value."""
    import pandas as pd

    series = frame[col]
    if pd.api.types.is_bool_dtype(series):
        series = series.astype(np.float64)
    if pd.api.types.is_numeric_dtype(series):
        values = series.to_numpy(dtype=np.float64)
    else:
        coerced = pd.to_numeric(series, errors="coerce")
        bad = np.flatnonzero(coerced.isna().to_numpy() & series.notna().to_numpy())
        if len(bad):
            i = int(bad[0])
            raise DataError(
                f"{source}: column {col!r} has a non-numeric value {series.iloc[i]!r} at "
                f"{_row_label(frame, i, source)} ({len(bad)} such value(s)). Mark it categorical "
                "or fix the data."
            )
        values = coerced.to_numpy(dtype=np.float64)
    missing = np.flatnonzero(~np.isfinite(values))
    if len(missing):
        i = int(missing[0])
        what = "an infinite" if np.isinf(values[i]) else "a missing (empty or NaN)"
        raise DataError(
            f"{source}: column {col!r} has {what} value at {_row_label(frame, i, source)} "
            f"({len(missing)} missing or infinite value(s) in all). Fill or drop those rows first."
        )
    return values


def _category_column(frame, col, source) -> np.ndarray:
    series = frame[col]
    missing = np.flatnonzero(series.isna().to_numpy())
    if len(missing):
        raise DataError(
            f"{source}: categorical column {col!r} has a missing value at "
            f"{_row_label(frame, int(missing[0]), source)}."
        )
    return series.astype(str).to_numpy()


def _infer_classes(frame, target, source) -> Optional[tuple]:
    """Sorted class values for integer/bool/text targets; None for a float (regression) target."""
    import pandas as pd

    series = frame[target]
    missing = np.flatnonzero(series.isna().to_numpy())
    if len(missing):
        raise DataError(
            f"{source}: target column {target!r} has a missing value at {_row_label(frame, int(missing[0]), source)}."
        )
    if pd.api.types.is_float_dtype(series):
        return None
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_integer_dtype(series):
        return tuple(sorted(series.unique().tolist()))
    return tuple(sorted(series.astype(str).unique().tolist()))


def _target_values(frame, target, classes, source) -> np.ndarray:
    if classes is None:
        return numeric_column(frame, target, source).astype(np.float32)
    series = frame[target]
    as_text = isinstance(classes[0], str)
    values = series.astype(str).to_numpy() if as_text else series.to_numpy()
    index = {c: i for i, c in enumerate(classes)}
    labels = np.empty(len(values), np.int32)
    for i, v in enumerate(values):
        label = index.get(v.item() if hasattr(v, "item") else v)
        if label is None:
            raise DataError(
                f"{source}: target column {target!r} has the class {v!r} at {_row_label(frame, i, source)}, "
                f"which the training data does not have (classes: {list(classes)})."
            )
        labels[i] = label
    return labels


def _transform(stats: TableStats, numeric, text) -> np.ndarray:
    blocks = []
    if numeric is not None:
        if stats.mean is not None:
            numeric = (numeric - stats.mean) / stats.std
        blocks.append(numeric)
    for col, cats in stats.categories.items():
        # A category never seen in training gets an all-zero one-hot row.
        blocks.append((text[col][:, None] == np.asarray(cats, dtype=object)[None, :]).astype(np.float64))
    return np.concatenate(blocks, axis=1).astype(np.float32)
