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

The kinds are classes (`zoo.data.kinds`): this module finds which one a path holds, and the kind
reads it with the user's settings passed whole (`zoo.data.reading.ReadOptions`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from zoo.data import kinds
from zoo.data.kinds import DataKind, target_like
from zoo.data.reading import TASKS, TEST_SPLIT, VALIDATION_SPLIT, Inference, PathData, ReadOptions  # noqa: F401
from zoo.errors import DataError
from zoo.image_files import split_folders

TABLE_SUFFIXES = kinds.TABLE.suffixes


def detect_kind(path: str, *, horizon=None, time_column=None, text_column=None) -> tuple[DataKind, str]:
    """``(kind, reason)`` for the data at `path`, without reading it all (`kind`: a `zoo.data.kinds.DataKind`)."""
    if not os.path.exists(path):
        raise DataError(f"{path} does not exist.")
    if os.path.isdir(path):
        folder = split_folders(path).get("train", path)
        classes = sorted(e for e in os.listdir(folder)
                         if not e.startswith(".") and os.path.isdir(os.path.join(folder, e)))
        if not os.listdir(path):
            raise DataError(f"Folder {path} is empty; expected one subfolder per class (of images or .txt files).")
        counts = {kinds.IMAGE: 0, kinds.TEXT: 0}  # the kinds that come as folders
        for name in classes:
            for _, _, files in os.walk(os.path.join(folder, name)):
                for f in files:
                    for kind in counts:
                        counts[kind] += f.lower().endswith(kind.suffixes)
        suffixes = kinds.IMAGE.suffixes + kinds.TEXT.suffixes
        if not classes:
            loose = [f for f in os.listdir(folder) if f.lower().endswith(suffixes)]
            detail = f"it holds {len(loose)} file(s) directly; move them into one subfolder per class" if loose \
                else "it has no subfolders"
            raise DataError(f"Folder {folder} has no class subfolders: {detail}.")
        if not any(counts.values()):
            raise DataError(f"The class folders of {folder} ({', '.join(classes[:5])}) hold no images "
                            f"({', '.join(kinds.IMAGE.suffixes)}) and no text files ({', '.join(kinds.TEXT.suffixes)}).")
        kind = kinds.IMAGE if counts[kinds.IMAGE] >= counts[kinds.TEXT] else kinds.TEXT
        return kind, f"{len(classes)} class folders with {counts[kind]} {kind} files"
    low = path.lower()
    if low.endswith(kinds.TEXT.suffixes):
        raise DataError(f"{path} is a single text file. `zoo train --data` classifies texts: give a folder with one "
                        "subfolder of text files per class, or a CSV with a text column. For a character language "
                        "model on one text, see zoo.data.from_text_files (the moby_dick_char_lstm recipe).")
    if not low.endswith(TABLE_SUFFIXES):
        raise DataError(f"{path}: zoo reads image or text folders and {', '.join(TABLE_SUFFIXES)} files; "
                        f"{os.path.splitext(path)[1] or 'a file without extension'} is none of them.")
    if horizon is not None or time_column is not None:
        return kinds.SERIES, "--horizon or --time-column given"
    if text_column is not None:
        return kinds.TEXT, f"--text-column {text_column} given"
    return kinds.TABLE, "a table file"


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


def from_path(path, options: Optional[ReadOptions] = None, **settings) -> PathData:
    """Reads `path` as zoo train does: see the module docstring.

    `options` (a `zoo.data.reading.ReadOptions`) or its fields as keywords (`target=`, `task=`,
    `image_size=`, `validation_split=`, `seed=`, ...): every setting left None is inferred.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file or folder path, got {type(path).__name__}.")
    unknown = sorted(set(settings) - set(ReadOptions.fields()))
    if unknown:
        from zoo.errors import UnknownNameError

        raise UnknownNameError("from_path setting", unknown[0], ReadOptions.fields())
    options = (options or ReadOptions()).replace(**settings)
    path = os.path.abspath(os.fspath(path))
    kind, why = detect_kind(path, horizon=options.horizon, time_column=options.time_column,
                            text_column=options.text_column)
    result = _read(path, kind, why, options)
    reading = {**result.kind.reading(result), **options.fractions, "seed": options.seed}
    if options.classes is not None:
        reading["classes"] = list(options.classes)
    return dataclasses.replace(result, reading=reading)


def _read(path: str, kind: DataKind, why: str, options: ReadOptions) -> PathData:
    if kind is not kinds.TABLE and os.path.isdir(path):  # an image or a text folder
        return kind.read(path, why, options)
    from zoo.data.tables import read_table

    frame, source, skipped = read_table(path, with_skipped=True)
    if kind is kinds.TABLE:
        kind, why, found_text = _frame_kind(frame, options.target, source)
        options = options.replace(text_column=options.text_column or found_text)
    if kind is kinds.SERIES and options.classes is not None:
        raise DataError(f"{source} is read as a series (forecasting); --classes does not apply.")
    result = kind.read(path, why, options, frame=frame, source=source)
    return dataclasses.replace(result, skipped=tuple(skipped) + tuple(result.skipped))


def _frame_kind(frame, target, source) -> tuple[DataKind, str, Optional[str]]:
    """For a table file: ``(kind, reason, text column)``: a series, text classification or a table."""
    from zoo.data.timeseries import find_time_column

    if target is None and target_like(frame) is None:
        time_col = find_time_column(frame)
        if time_col is not None:
            return kinds.SERIES, f"time column {time_col!r} and no target-like column", None
    text_col = _text_column(frame, exclude=target)
    if text_col is not None:
        return kinds.TEXT, f"column {text_col!r} holds free text", text_col
    return kinds.TABLE, f"{len(frame.columns)} columns", None
