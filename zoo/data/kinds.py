"""The kinds of data zoo reads from a path: image, table, text, series. One class each, and the one place
that knows them.

Each kind says what it is called (its raw input's `kind`, `zoo.data.raw_input`), how it is read
(`read`, with the user's `ReadOptions` passed whole), which `from_path` arguments read it again the
same way (`reading`), which recipe trains it by default (`default_recipe`), the builder arguments it
fixes (`builder_arguments`) and the Keras backends that can train on it (`backends`). Code that needs
to tell kinds apart asks the kind (`data.kind.default_recipe(data)`) instead of comparing names; a
kind still equals its name (`data.kind == "image"`), for code not moved yet.

    from zoo.data import kinds
    kinds.get("image").recipe             # "own_data/images"
    data = zoo.data.from_path("photos/"); data.kind is kinds.IMAGE
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

import numpy as np

from zoo.data import raw_input as raw
from zoo.data.batches import numpy_batches
from zoo.data.reading import PathData, ReadOptions
from zoo.data.reading import Inference
from zoo.errors import DataError, UnknownNameError, suggest

TARGET_NAMES = ("target", "label", "labels", "class", "y", "category", "outcome")
MAX_CLASSES = 20  # an integer target with more distinct values is a quantity, not a class
MAX_IMAGE_SIDE = 224  # larger images are shrunk to this (the common ImageNet size)
EVERY_BACKEND = ("tensorflow", "jax", "torch")


class DataKind:
    """One kind of data; subclasses fill in the class attributes and `read`."""

    input_class: ClassVar[type]  # its `zoo.data.raw_input` class; `name` is that class's `kind`
    description: ClassVar[str]
    suffixes: ClassVar[tuple] = ()  # the file suffixes of this kind (what `detect_kind` counts)
    recipe: ClassVar[str]  # the default recipe, zoo/recipes/<recipe>.toml

    @property
    def name(self) -> str:
        return self.input_class.kind

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"kinds.{self.name.upper()}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            return other == self.name
        return isinstance(other, DataKind) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def read(self, path, why: str, options: ReadOptions, frame=None, source=None) -> PathData:
        """The data at `path` (a table file already read: `frame`, named `source`), with every inference."""
        raise NotImplementedError

    def reading(self, data: PathData) -> dict:
        """The `from_path` arguments that fix what was inferred (JSON-ready)."""
        raise NotImplementedError

    def default_recipe(self, data: PathData) -> tuple[str, str]:
        """``(recipe name, reason)``: the recipe that trains this data when none is given."""
        return self.recipe, f"{self.name} data"

    def builder_arguments(self, data: PathData, params) -> dict:
        """Builder keywords this kind of data fixes (name -> (value, reason)), of those in `params`."""
        return {}

    def backends(self, data: PathData) -> tuple[str, ...]:
        """The Keras backends that can train a model on `data` (a model that takes strings: TensorFlow only)."""
        return EVERY_BACKEND


class Image(DataKind):
    input_class = raw.ImageInput
    description = "images, one subfolder per class"
    recipe = "own_data/images"
    large_recipe = "own_data/images_large"
    small_side = 64  # the small-image recipe up to this side

    @property
    def suffixes(self):
        from zoo.image_files import IMAGE_EXTENSIONS

        return IMAGE_EXTENSIONS

    def read(self, path, why: str, options: ReadOptions, frame=None, source=None) -> PathData:
        from zoo.data.image_folder import COLOR_MODES, check_images, from_image_folder, list_image_splits

        image_size, color_mode, task, classes = options.image_size, options.color_mode, options.task, options.classes
        fractions, common = options.fractions, options.common

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
        return PathData(path, self, "classification", data, raw.ImageInput(image_size, COLOR_MODES[color_mode]),
                        data.class_names, None, tuple(inferences), data.skipped, tuple(notes))

    def reading(self, data: PathData) -> dict:
        color = {1: "grayscale", 3: "rgb", 4: "rgba"}[data.raw_input.channels]
        return {"image_size": list(data.raw_input.image_size), "color_mode": color}

    def default_recipe(self, data: PathData) -> tuple[str, str]:
        if max(data.raw_input.image_size) <= self.small_side:
            return self.recipe, f"images of at most {self.small_side} px"
        return self.large_recipe, f"images larger than {self.small_side} px"


class Table(DataKind):
    input_class = raw.TableInput
    description = "a table (CSV or Parquet): feature columns and a target"
    suffixes = (".csv", ".parquet", ".pq")
    recipe = "own_data/table"
    # Tables up to this many train rows get a TabM-mini ensemble of MEMBERS MLPs (tabular_mlp's `members`):
    # it costs about MEMBERS times the compute, seconds on such a table, and lowers the variance that
    # small tables suffer most from (benchmarks/results/tables.md).
    ENSEMBLE_ROWS, MEMBERS = 5_000, 8

    def read(self, path, why: str, options: ReadOptions, frame=None, source=None) -> PathData:
        import pandas as pd

        from zoo.data.tables import from_table, mixed_type_problem

        target, task, features, categorical, classes = (options.target, options.task, options.features,
                                                         options.categorical, options.classes)
        fractions, common = options.fractions, options.common

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

        scaling = options.scaling
        scaling_why = "given" if scaling else "median and interquartile range, then smooth clipping (RealMLP-TD)"
        scaling = scaling or "robust"
        data = from_table(frame, features, target, categorical=categorical, stratify=task == "classification",
                          raw=True, name=source, scaling=scaling, **fractions, **common)
        stats = data.stats
        scale = None
        if task == "regression":
            y = np.concatenate([y for _, y in numpy_batches(data.dataset("train", shuffle=False, batch_size=4096))])
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
        return PathData(path, self, task, data, table_input, data.class_names if task == "classification" else None,
                        target, tuple(inferences))

    def reading(self, data: PathData) -> dict:
        r = data.raw_input
        return {"target": data.target, "task": data.task, "features": [*r.numeric, *r.categories],
                "categorical": list(r.categories), "scaling": r.scaling}

    def builder_arguments(self, data: PathData, params) -> dict:
        found = {}
        if "numeric_features" in params:
            found["numeric_features"] = (len(data.raw_input.numeric), "the numeric columns come first (embedded); "
                                         "one-hot codes follow")
        if "members" in params:
            rows = data.splits.num_examples.get("train", 0)
            found["members"] = ((self.MEMBERS, f"a TabM-mini ensemble: {rows} train rows, at most "
                                 f"{self.ENSEMBLE_ROWS:,}") if rows <= self.ENSEMBLE_ROWS
                                else (1, f"one MLP: {rows} train rows, more than {self.ENSEMBLE_ROWS:,}"))
        return found

    def backends(self, data: PathData) -> tuple[str, ...]:
        return ("tensorflow",) if data.raw_input.categories else EVERY_BACKEND  # categories: looked up as strings


class Text(DataKind):
    input_class = raw.TextInput
    description = "texts with a class: a folder of .txt files per class, or a table's text column"
    suffixes = (".txt", ".text", ".md")
    recipe = "own_data/text"

    def read(self, path, why: str, options: ReadOptions, frame=None, source=None) -> PathData:
        if frame is None:
            return self._read_folder(path, why, options)
        return self._read_table(path, frame, source, why, options)

    def _read_folder(self, path, why, options: ReadOptions) -> PathData:
        from zoo.data.labelled_text import from_text_folder

        task, classes, fractions, common = options.task, options.classes, options.fractions, options.common
        if task not in (None, "classification"):
            raise DataError(f"A folder of text files is read for classification; --task {task} does not apply.")
        data = from_text_folder(path, classes=classes, **fractions, **common)
        return self._result(path, data, [Inference("data", "text folder", why)], None)

    def _read_table(self, path, frame, source, why, options: ReadOptions) -> PathData:
        from zoo.data.labelled_text import from_labelled_texts

        task, classes, target, text_column = options.task, options.classes, options.target, options.text_column
        fractions, common = options.fractions, options.common
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
        return self._result(path, data, inferences, target, text_column)

    def _result(self, path, data, inferences, target, column=None) -> PathData:
        text_input = dataclasses.replace(raw.TextInput.fit(data.texts["train"]), column=column)
        inferences += [
            Inference("task", "classification", f"{len(data.class_names)} classes"),
            Inference("classes", data.class_names, "sorted label values", "--classes"),
            Inference("tokens", f"{len(text_input.vocabulary)} words, sequences of {text_input.sequence_length}",
                      "vocabulary of the train texts (at most 20000 words); length covers 95% of them"),
        ]
        return PathData(path, self, "classification", data, text_input, data.class_names, target, tuple(inferences),
                        data.skipped)

    def reading(self, data: PathData) -> dict:
        r = data.raw_input
        return {"target": data.target, "text_column": r.column} if r.column else {}

    def builder_arguments(self, data: PathData, params) -> dict:
        if "vocab_size" not in params:
            return {}
        return {"vocab_size": (data.raw_input.vocab_size, "words in the train texts + padding + unknown")}

    def backends(self, data: PathData) -> tuple[str, ...]:
        return ("tensorflow",)  # the model tokenizes raw strings (TextVectorization): TensorFlow tensors only


class Series(DataKind):
    input_class = raw.SeriesInput
    description = "a time series: a table with a time column"
    recipe = "own_data/series"

    def read(self, path, why: str, options: ReadOptions, frame=None, source=None) -> PathData:
        import pandas as pd

        from zoo.data.timeseries import from_series, read_series

        target, time_column, horizon, window, task = (options.target, options.time_column, options.horizon,
                                                      options.window, options.task)
        fractions, common = options.fractions, options.common

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
        return PathData(path, self, "forecast", data, series_input, None, str(target), tuple(inferences))

    def reading(self, data: PathData) -> dict:
        r = data.raw_input
        return {"target": r.target, "time_column": r.time_column, "horizon": r.horizon, "window": r.window}


IMAGE, TABLE, TEXT, SERIES = Image(), Table(), Text(), Series()
KINDS = (IMAGE, TABLE, TEXT, SERIES)


def get(name) -> DataKind:
    """The kind called `name` ("image", "table", "text", "series"); an unknown name gets close names."""
    for kind in KINDS:
        if kind == name:
            return kind
    raise UnknownNameError("kind of data", str(name), [k.name for k in KINDS])


def target_like(frame) -> Optional[str]:
    """The column named like a target (`TARGET_NAMES`), or None."""
    lowered = {str(c).strip().lower(): c for c in frame.columns}
    return next((lowered[n] for n in TARGET_NAMES if n in lowered), None)


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
    named = target_like(frame)
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
