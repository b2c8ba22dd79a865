"""Real datasets that ship inside scikit-learn and statsmodels: nothing to download.

| name | source | task | examples | input |
|---|---|---|---|---|
| ``breast_cancer`` | ``sklearn.datasets.load_breast_cancer`` (Wisconsin diagnostic) | 2 classes | 569 rows | (30,) |
| ``wine`` | ``sklearn.datasets.load_wine`` (UCI wine recognition) | 3 classes | 178 rows | (13,) |
| ``sunspots`` | ``statsmodels.datasets.sunspots`` (yearly, 1700-2008) | forecast next year | 309 steps | (22, 1) |
| ``co2`` | ``statsmodels.datasets.co2`` (Mauna Loa, weekly, 1958-2001) | forecast next week | 2284 steps | (52, 1) |

Tables are split with :func:`zoo.data.splits.random_split`, stratified by
class with seed 0: 20% test, 16% validation, 64% train; features are
standardized with the train rows' mean and std (``load_splits(name).stats``).

Series are split in time order (70% train, 15% validation, 15% test periods,
see :func:`zoo.data.from_series`) and normalised with the training period's
mean and std; ``load_splits(name).naive_mae("test")`` is the last-value baseline
in original units. ``co2`` has 59 missing weeks: they are filled by linear
interpolation in time (``pandas.Series.interpolate(method="time")``) before
windowing. Sunspot windows span 22 years (two solar cycles); co2 windows one year.
"""

from __future__ import annotations

import dataclasses
import functools
import os

from zoo.data import registry, tables, timeseries

TABLE_SEED = 0
TABLE_VALIDATION, TABLE_TEST = 0.16, 0.2
SERIES_VALIDATION, SERIES_TEST = 0.15, 0.15


# ---------------------------------------------------------------- scikit-learn tables


@functools.lru_cache(maxsize=None)
def _sklearn_table(loader_name: str) -> tables.TableData:
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, loader_name)(as_frame=True)
    features = list(bunch.feature_names)
    data = tables.from_table(
        bunch.frame,
        features=features,
        target="target",
        validation_split=TABLE_VALIDATION,
        test_split=TABLE_TEST,
        seed=TABLE_SEED,
    )
    # Labels are sklearn's codes 0..K-1, so its target names line up with them.
    class_names = tuple(str(c) for c in bunch.target_names)
    return dataclasses.replace(data, name=loader_name.removeprefix("load_"), class_names=class_names)


def _sklearn_file(csv_name: str):
    def prepare(data_dir: str) -> str:
        del data_dir  # bundled with scikit-learn: nothing to prepare
        import sklearn.datasets

        return os.path.join(os.path.dirname(sklearn.datasets.__file__), "data", csv_name)

    return prepare


def _register_table(name, loader_name, csv_name, input_shape, num_classes, splits, description):
    registry.register_dataset(
        registry.DatasetSpec(
            name=name,
            source="sklearn",
            input_shape=input_shape,
            num_classes=num_classes,
            splits=splits,
            description=description,
            prepare=_sklearn_file(csv_name),
            prepare_hint="Bundled with scikit-learn: `pip install scikit-learn`.",
            read_splits=lambda data_dir: _sklearn_table(loader_name),
        )
    )


_register_table(
    "breast_cancer",
    "load_breast_cancer",
    "breast_cancer.csv",
    (30,),
    2,
    {"train": 365, "validation": 91, "test": 113},
    "Breast cancer Wisconsin (diagnostic): 30 standardized features, 2 classes (malignant, benign).",
)
_register_table(
    "wine",
    "load_wine",
    "wine_data.csv",
    (13,),
    3,
    {"train": 114, "validation": 28, "test": 36},
    "Wine recognition (UCI): 13 standardized chemical features, 3 cultivars.",
)


# ---------------------------------------------------------------- statsmodels series


@functools.lru_cache(maxsize=None)
def _sunspots() -> timeseries.SeriesData:
    import statsmodels.datasets

    frame = statsmodels.datasets.sunspots.load_pandas().data
    series = frame.set_index(frame["YEAR"].astype(int))["SUNACTIVITY"]
    return timeseries.from_series(
        series, window=22, horizon=1, validation_split=SERIES_VALIDATION, test_split=SERIES_TEST, name="sunspots"
    )


def co2_series():
    """The weekly Mauna Loa CO2 series (ppm) with its 59 missing weeks interpolated in time."""
    import statsmodels.datasets

    series = statsmodels.datasets.co2.load_pandas().data["co2"]
    return series.interpolate(method="time")


@functools.lru_cache(maxsize=None)
def _co2() -> timeseries.SeriesData:
    return timeseries.from_series(
        co2_series(), window=52, horizon=1, validation_split=SERIES_VALIDATION, test_split=SERIES_TEST, name="co2"
    )


def _statsmodels_file(module: str, csv_name: str):
    def prepare(data_dir: str) -> str:
        del data_dir  # bundled with statsmodels: nothing to prepare
        import importlib

        package = importlib.import_module(f"statsmodels.datasets.{module}")
        return os.path.join(os.path.dirname(package.__file__), csv_name)

    return prepare


def _register_series(name, loader, input_shape, splits, description):
    registry.register_dataset(
        registry.DatasetSpec(
            name=name,
            source="statsmodels",
            input_shape=input_shape,
            num_classes=None,
            output_units=1,  # the registered series forecast the next step
            splits=splits,
            description=description,
            prepare=_statsmodels_file(name, f"{name}.csv"),
            prepare_hint="Bundled with statsmodels: `pip install statsmodels`.",
            read_splits=lambda data_dir: loader(),
        )
    )


_register_series(
    "sunspots",
    _sunspots,
    (22, 1),
    {"train": 195, "validation": 46, "test": 46},
    "Yearly sunspot activity 1700-2008: 22-year windows -> next year, time-ordered 70/15/15 split.",
)
_register_series(
    "co2",
    _co2,
    (52, 1),
    {"train": 1548, "validation": 342, "test": 342},
    "Weekly Mauna Loa CO2 1958-2001 (gaps interpolated): 52-week windows -> next week, 70/15/15 split.",
)
