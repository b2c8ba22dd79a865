"""Time series as windowed forecasting pipelines, split in time order.

    data = zoo.data.from_series(df["load"], window=48, horizon=6, validation_split=0.15, test_split=0.15)
    x, y = next(iter(data.train))     # x (batch, 48, 1), y (batch, 6): normalised with train statistics
    data.denormalize(model.predict(data.test))          # back to the series' units
    zoo.data.naive_forecast_mae(data, "test")            # the last-value baseline, original units

Splits are consecutive periods: train first, then validation, then test.
A window belongs to the split whose period holds *all* of its targets; its
inputs may reach back into earlier periods (that history is known at forecast
time), so no target of a later split is ever seen in training and no window
straddles two target periods. Normalisation (per-feature mean and std) uses
the training period only.

``raw=True`` fits the same mean and std but feeds windows in the series' own
units, for a model that carries its own ``Normalization`` and output scaling
(``zoo.data.raw_input``). :func:`read_series` reads a CSV with a time column.

``seq2seq=False``: y holds the `horizon` values after the window. ``seq2seq=True``:
y holds, for every input step t, the `horizon` values after step t (for
sequence models trained at every step).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from zoo.data import splits as splits_lib
from zoo.data.batches import Batching, Preprocess, takes_batching
from zoo.data.memory import Arrays
from zoo.data.splits import SplitData
from zoo.errors import DataError


@dataclasses.dataclass(frozen=True, eq=False)
class SeriesData(SplitData):
    """Windowed splits of a series plus what is needed to read predictions back.

    Attributes:
        window, horizon, seq2seq, stride: the windowing.
        columns: feature names; ``target_columns``: indices of the predicted ones.
        mean, std: per-feature normalisation fitted on the training period.
        raw: the windows are in original units (mean and std fitted, not applied).
        values: the series in original units, ``(time, features)`` float64.
        bounds: split -> ``(start, stop)`` time positions of its target period.
        starts: split -> start position of every window, in pipeline order.
    """

    window: int = 0
    horizon: int = 1
    seq2seq: bool = False
    stride: int = 1
    columns: tuple = ()
    target_columns: tuple = ()
    mean: Optional[np.ndarray] = None
    std: Optional[np.ndarray] = None
    values: Optional[np.ndarray] = None
    bounds: dict = dataclasses.field(default_factory=dict)
    starts: dict = dataclasses.field(default_factory=dict)
    raw: bool = False

    def target_positions(self, split: str) -> np.ndarray:
        """Time positions of every target of `split`: ``(windows, horizon)`` or, for
        seq2seq, ``(windows, window, horizon)``."""
        starts = self._starts(split)
        h = np.arange(self.horizon)
        if self.seq2seq:
            return starts[:, None, None] + 1 + np.arange(self.window)[None, :, None] + h[None, None, :]
        return starts[:, None] + self.window + h[None, :]

    def targets(self, split: str, original_units: bool = True) -> np.ndarray:
        """y of `split` as one array (shape of the batches' y, stacked)."""
        y = self.values[self.target_positions(split)][..., list(self.target_columns)]
        if not original_units and not self.raw:
            y = (y - self.mean[list(self.target_columns)]) / self.std[list(self.target_columns)]
        return self._squeeze(y)

    def denormalize(self, y) -> np.ndarray:
        """Normalised targets or predictions (as in y) -> the series' original units."""
        y = np.asarray(y, dtype=np.float64)
        if self.raw:
            return y  # the pipeline's y is already in original units
        cols = list(self.target_columns)
        if len(cols) == 1:
            return y * self.std[cols[0]] + self.mean[cols[0]]
        return y * self.std[cols] + self.mean[cols]

    def naive_mae(self, split: str = "test") -> float:
        """MAE, in original units, of forecasting every target as the last value observed
        before it (the window's last step; for seq2seq, step t)."""
        starts = self._starts(split)
        if self.seq2seq:
            last = starts[:, None, None] + np.arange(self.window)[None, :, None] + np.zeros(self.horizon, int)
        else:
            last = np.broadcast_to((starts + self.window - 1)[:, None], (len(starts), self.horizon))
        cols = list(self.target_columns)
        truth = self.values[self.target_positions(split)][..., cols]
        guess = self.values[last][..., cols]
        return float(np.mean(np.abs(truth - guess)))

    def _starts(self, split: str) -> np.ndarray:
        if split not in self.starts:
            raise ValueError(f"No split {split!r} in {self.name!r}; available: {', '.join(self.starts)}.")
        return self.starts[split]

    def _squeeze(self, y):
        return y[..., 0] if len(self.target_columns) == 1 else y


@takes_batching(batch_size=32)
def from_series(
    values,
    window: int,
    horizon: int = 1,
    *,
    validation_split: float = 0.15,
    test_split: float = 0.15,
    targets: Optional[Sequence] = None,
    seq2seq: bool = False,
    normalize: bool = True,
    stride: int = 1,
    name: str = "series",
    raw: bool = False,
    batching: Batching,
) -> SeriesData:
    """A 1-D or multivariate series as batched ``(x, y)`` forecasting windows.

    Args:
        values: 1-D array/list/``pandas.Series`` or 2-D ``(time, features)``
            array/``DataFrame``, oldest first, without gaps (fill NaNs first).
        window: input steps per example; x is ``(window, features)`` float32.
        horizon: steps predicted after each window.
        validation_split, test_split: fractions of the time steps forming the
            validation and (last) test periods.
        targets: predicted columns (names for a DataFrame, else indices);
            default every column. With one target column y is ``(horizon,)``
            (seq2seq: ``(window, horizon)``), else it has a trailing target axis.
        normalize: subtract the training period's mean and divide by its std
            (x and y alike); :meth:`SeriesData.denormalize` undoes it.
        stride: steps between consecutive window starts.
        raw: fit mean and std but keep x and y in the series' units.
    """
    array, columns, labels = _as_array(values, name)
    for arg, value in (("window", window), ("horizon", horizon), ("stride", stride)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{arg} must be a positive integer, got {value!r}.")
    target_columns = _target_columns(targets, columns, name)
    length = len(array)
    if length < window + horizon:
        raise DataError(
            f"{name}: the series has {length} steps, too short for window={window} + horizon={horizon} "
            f"(needs at least {window + horizon})."
        )
    bounds = splits_lib.chronological_bounds(length, {"validation": validation_split, "test": test_split})
    train_lo, train_hi = bounds[splits_lib.TRAIN]
    if normalize:
        mean = array[train_lo:train_hi].mean(axis=0)
        std = array[train_lo:train_hi].std(axis=0)
        std = np.where(std > 0, std, 1.0)
    else:
        mean, std = np.zeros(array.shape[1]), np.ones(array.shape[1])

    all_starts = np.arange(0, length - window - horizon + 1, stride)
    first_target = all_starts + (1 if seq2seq else window)
    last_target = all_starts + window + horizon - 1
    normalized = (array if raw else (array - mean) / std).astype(np.float32)
    starts, parts = {}, {}
    for split, (lo, hi) in bounds.items():
        split_starts = all_starts[(first_target >= lo) & (last_target < hi)]
        if len(split_starts) == 0:
            raise DataError(
                f"{name}: the {split} period (steps {lo}..{hi - 1}, {hi - lo} steps) holds no complete "
                f"window target: window={window}, horizon={horizon}. Use a larger {split} fraction, a "
                "shorter window/horizon or a longer series."
            )
        starts[split] = split_starts
        parts[split] = (Arrays(split_starts.astype(np.int32)), len(split_starts))
    return SeriesData(
        name=name,
        parts=parts,
        input_shape=(window, array.shape[1]),
        num_classes=None,
        batching=batching,
        preprocess=_windows(normalized, window, horizon, target_columns, seq2seq),
        window=int(window),
        horizon=int(horizon),
        seq2seq=bool(seq2seq),
        stride=int(stride),
        columns=tuple(columns),
        target_columns=tuple(target_columns),
        mean=mean,
        std=std,
        values=array,
        bounds=bounds,
        starts=starts,
        raw=bool(raw),
    )


TIME_NAMES = ("time", "date", "datetime", "timestamp", "ds", "year", "month", "week", "day", "period")


def find_time_column(frame) -> Optional[str]:
    """The column that orders a table in time: named like one (``date``, ``time``, ``year``, ...) or
    the first text column that parses as dates; None when there is none."""
    import pandas as pd

    named = [c for c in frame.columns if str(c).strip().lower() in TIME_NAMES]
    if named:
        return named[0]
    for col in frame.columns:
        series = frame[col]
        if pd.api.types.is_datetime64_any_dtype(series):
            return col
        if series.dtype == object:
            parsed = _parse_times(series)
            if parsed is not None and parsed.notna().mean() >= 0.9:
                return col
    return None


def _parse_times(series):
    import warnings

    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas warns when it guesses a format per element
        try:
            return pd.to_datetime(series, errors="coerce")
        except (ValueError, TypeError, OverflowError):
            return None


def read_series(path, time_column: Optional[str] = None, columns: Optional[Sequence[str]] = None,
                source: Optional[str] = None):
    """A CSV (or Parquet) table with a time column as a DataFrame indexed by time, oldest first.

    `time_column` default: :func:`find_time_column`. `columns`: the value columns
    (default every other column). Rows must already be in time order, without
    repeated times: a series that is not is an error naming the first bad row
    (sorting silently could hide a mixed-up file). `path` may also be a DataFrame already read
    (`source` then names it in errors).
    """
    import pandas as pd

    from zoo.data.tables import read_table

    frame, read_source = read_table(path)
    source = source or read_source
    if time_column is None:
        time_column = find_time_column(frame)
        if time_column is None:
            raise DataError(
                f"{source} has no time column (none named {', '.join(TIME_NAMES[:6])}, ... and none that parses "
                "as dates); name it with --time-column."
            )
    elif time_column not in frame.columns:
        from zoo.errors import suggest

        close = suggest(time_column, [str(c) for c in frame.columns], n=3)
        raise DataError(f"{source} has no time column {time_column!r}. Did you mean: {', '.join(close)}? "
                        f"Columns: {', '.join(map(str, frame.columns))}.")
    times = frame[time_column]
    if not pd.api.types.is_numeric_dtype(times):
        parsed = _parse_times(times)
        if parsed is None or parsed.isna().any():
            bad = int(np.flatnonzero(parsed.isna().to_numpy())[0]) if parsed is not None else 0
            raise DataError(f"{source}: time column {time_column!r} has a value that is not a time: "
                            f"{times.iloc[bad]!r} at row {bad} (line {bad + 2}).")
        times = parsed
    order = np.diff(times.to_numpy()) if len(times) > 1 else np.array([])
    not_increasing = np.flatnonzero(~(order > order.dtype.type(0))) if len(order) else []
    if len(not_increasing):
        i = int(not_increasing[0]) + 1
        raise DataError(f"{source}: time column {time_column!r} is not strictly increasing at row {i} "
                        f"(line {i + 2}: {frame[time_column].iloc[i]!r} after {frame[time_column].iloc[i - 1]!r}); "
                        "sort the file by time and remove repeated times.")
    values = frame.drop(columns=[time_column])
    if columns is not None:
        missing = [c for c in columns if c not in values.columns]
        if missing:
            from zoo.errors import suggest

            raise DataError(f"{source} has no column {missing[0]!r}. Did you mean: "
                            f"{', '.join(suggest(missing[0], [str(c) for c in values.columns], n=3))}?")
        values = values[list(columns)]
    values.index = pd.Index(times, name=str(time_column))
    return values


def naive_forecast_mae(data, split: str = "test", *, data_dir=None) -> float:
    """MAE of the naive last-value forecast on `split`'s windows, in original units.

    `data` is a :class:`SeriesData` or the name of a registered series
    dataset (``"sunspots"``, ``"co2"``).
    """
    if isinstance(data, str):
        from zoo.data import loading  # lazy: loading imports the registry, which imports this module

        data = loading.load_splits(data, data_dir=data_dir)
    if not isinstance(data, SeriesData):
        raise TypeError(f"naive_forecast_mae expects SeriesData or a series dataset name, got {type(data).__name__}.")
    return data.naive_mae(split)


def _as_array(values, name):
    """``(float64 array (time, features), column names, time labels or None)``, checked."""
    import pandas as pd

    labels = None
    if isinstance(values, pd.Series):
        columns, labels = [str(values.name) if values.name is not None else "value"], values.index
        raw = values.to_frame()
    elif isinstance(values, pd.DataFrame):
        columns, labels, raw = [str(c) for c in values.columns], values.index, values
    else:
        arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise ValueError(f"{name}: a series must be 1-D (time,) or 2-D (time, features), got shape {arr.shape}.")
        columns = [str(i) for i in range(arr.shape[1])]
        raw = pd.DataFrame(arr, columns=columns)
    if raw.shape[1] == 0 or len(raw) == 0:
        raise DataError(f"{name}: the series is empty.")
    out = np.empty(raw.shape, dtype=np.float64)
    for j in range(raw.shape[1]):
        col = raw.iloc[:, j]
        numeric = pd.to_numeric(col, errors="coerce")
        bad = np.flatnonzero(numeric.isna().to_numpy() & col.notna().to_numpy())
        if len(bad):
            i = int(bad[0])
            raise DataError(
                f"{name}: non-numeric value {col.iloc[i]!r} at position {i}{_at(labels, i)}"
                f"{_in_column(columns, j)}."
            )
        out[:, j] = numeric.to_numpy(dtype=np.float64)
    missing = np.argwhere(~np.isfinite(out))
    if len(missing):
        i, j = (int(v) for v in missing[0])
        raise DataError(
            f"{name}: NaN or infinite value at position {i}{_at(labels, i)}{_in_column(columns, j)} "
            f"({len(missing)} in all). Fill the gaps first, e.g. with pandas' interpolate()."
        )
    return out, columns, labels


def _at(labels, i):
    import pandas as pd

    if labels is None or isinstance(labels, pd.RangeIndex):
        return ""  # the position says it all
    return f" (index {labels[i]})"


def _in_column(columns, j):
    return f" in column {columns[j]!r}" if len(columns) > 1 else ""


def _target_columns(targets, columns, name):
    if targets is None:
        return list(range(len(columns)))
    if isinstance(targets, (str, int, np.integer)):
        targets = [targets]
    out = []
    for t in targets:
        if isinstance(t, str):
            if t not in columns:
                from zoo.errors import suggest

                raise DataError(
                    f"{name} has no column {t!r}. Did you mean: {', '.join(suggest(t, columns, n=3))}? "
                    f"Columns: {', '.join(columns)}."
                )
            out.append(columns.index(t))
        elif isinstance(t, (int, np.integer)) and not isinstance(t, bool) and 0 <= t < len(columns):
            out.append(int(t))
        else:
            raise ValueError(f"targets must be column names or indices in [0, {len(columns)}), got {t!r}.")
    return out


def _windows(normalized: np.ndarray, window: int, horizon: int, target_columns, seq2seq: bool) -> Preprocess:
    """Window start -> ``(x, y)``, gathered from the one float32 series `normalized`: each split's
    examples are its window starts, so no window is ever copied before its batch is made."""
    targets = np.ascontiguousarray(normalized[:, list(target_columns)])
    squeeze = len(target_columns) == 1
    x_offsets = np.arange(window)
    y_offsets = (1 + np.arange(window)[:, None] + np.arange(horizon)[None, :]) if seq2seq else window + np.arange(horizon)

    def batch(starts):
        starts = starts.astype(np.int64)
        x = normalized[starts[:, None] + x_offsets]
        y = targets[starts.reshape(-1, *([1] * y_offsets.ndim)) + y_offsets]
        return x, (y[..., 0] if squeeze else y)

    def example(start):  # traced once per pipeline: the series becomes a constant of its graph
        import tensorflow as tf

        start = tf.cast(start, tf.int32)
        x = tf.gather(tf.constant(normalized), start + tf.constant(x_offsets, tf.int32))
        y = tf.gather(tf.constant(targets), start + tf.constant(y_offsets, tf.int32))
        return x, (y[..., 0] if squeeze else y)

    return Preprocess("series_windows", example, batch)
