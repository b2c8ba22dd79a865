"""`zoo data info PATH`: what zoo finds at a path, before any training.

    info = zoo.data.describe_path("photos/")
    print("\n".join(info.lines()))          # classes with counts, sizes, value ranges, skipped files
    info.to_dict()                          # the same as JSON-ready data

For an image folder: per split, the classes with their counts, the image sizes and Pillow
modes, the pixel value range (of a sample of decoded images) and every file that cannot be
read, with the reason. For a table: rows, each column with its type, missing values, range or
distinct values, and the lines that cannot be parsed. For a folder of texts: classes, counts and
text lengths. For a series: the time column, its span and frequency, and the value columns.
Last, what ``zoo train --data PATH`` would infer from it (or why it could not train on it).

Nothing here raises for a bad file: it is listed. Structural problems (an empty folder, no
class folders) are reported as the one finding.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import numpy as np

from zoo.errors import DataError

PIXEL_SAMPLE = 300  # images decoded to measure pixel values


@dataclasses.dataclass
class PathInfo:
    """What :func:`describe_path` found. ``sections`` are ``(title, [lines])``; ``skipped`` are
    ``(file or line, reason)``; ``facts`` hold the numbers (for JSON)."""

    path: str
    kind: str
    sections: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    facts: dict = dataclasses.field(default_factory=dict)
    training: list = dataclasses.field(default_factory=list)  # what `zoo train --data` infers
    problem: Optional[str] = None  # why it cannot be used, if so

    def lines(self) -> list[str]:
        out = [f"{self.path}: {self.kind}"]
        for title, lines in self.sections:
            out.append(f"{title}:")
            out += [f"  {line}" for line in lines]
        out.append(f"skipped: {len(self.skipped)} file(s) or line(s)" + (":" if self.skipped else ""))
        out += [f"  {where}: {why}" for where, why in self.skipped]
        if self.problem:
            out.append(f"problem: {self.problem}")
        if self.training:
            out.append("zoo train --data would use:")
            out += [f"  {line}" for line in self.training]
        return out

    def to_dict(self) -> dict:
        return {"path": self.path, "kind": self.kind, "facts": self.facts,
                "skipped": [{"where": w, "reason": r} for w, r in self.skipped],
                "training": self.training, "problem": self.problem}


def describe_path(path) -> PathInfo:
    """Describes the data at `path`; see the module docstring."""
    from zoo.data import kinds
    from zoo.data.path_data import detect_kind

    path = os.path.abspath(os.fspath(path))
    try:
        kind, _ = detect_kind(path)
    except DataError as e:
        return PathInfo(path, "unusable", problem=str(e))
    if kind is kinds.IMAGE:
        info = _images(path)
    elif kind is kinds.TEXT and os.path.isdir(path):
        info = _text_folder(path)
    else:
        info = _table_file(path)
    if info.problem is None:
        _training_preview(info)
    return info


def _training_preview(info: PathInfo) -> None:
    from zoo.data.path_data import from_path

    try:
        data = from_path(info.path)
    except (DataError, ValueError) as e:
        info.problem = str(e)
        return
    info.training = [i.line() for i in data.inferences] + [line for line in data.explain()
                                                             if line.startswith(("splits:", "note:"))]


def _count(items) -> dict:
    out: dict = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


# ---------------------------------------------------------------- images


def _images(path: str) -> PathInfo:
    from PIL import Image

    from zoo.data.image_folder import check_images, list_image_splits

    info = PathInfo(path, "image folder")
    try:
        class_names, files = list_image_splits(path)
    except DataError as e:
        info.problem = str(e)
        return info
    everything = [f for fs in files.values() for _, f in fs]
    check = check_images(everything)
    bad = {p for p, _ in check.skipped}
    info.skipped = list(check.skipped)
    counts = {}
    for split, split_files in files.items():
        per_class = _count(class_names[label] for label, f in split_files if f not in bad)
        counts[split] = {c: per_class.get(c, 0) for c in class_names}
    width = max(len(c) for c in class_names)
    lines = [f"{c:<{width}}  " + "  ".join(f"{s} {counts[s][c]}" for s in counts) for c in class_names]
    info.sections.append((f"classes ({len(class_names)})", lines))
    sizes = sorted(check.sizes.items(), key=lambda kv: -kv[1])
    size_lines = [f"{h}x{w} (height x width): {n} images" for (w, h), n in sizes[:10]]
    if len(sizes) > 10:
        size_lines.append(f"... {len(sizes) - 10} more sizes")
    mode_line = "Pillow modes: " + ", ".join(f"{m} {n}" for m, n in sorted(check.modes.items(), key=lambda kv: -kv[1]))
    info.sections.append(("image sizes", size_lines + [mode_line]))
    good = [f for f in everything if f not in bad]
    step = max(len(good) // PIXEL_SAMPLE, 1)
    lo, hi, total, n = 255.0, 0.0, 0.0, 0
    for f in good[::step][:PIXEL_SAMPLE]:
        try:
            with Image.open(f) as image:
                a = np.asarray(image.convert("RGB") if image.mode not in ("L", "RGB") else image, np.float64)
        except OSError as e:  # passed the structure check, fails to decode: truncated data
            info.skipped.append((f, f"cannot be decoded: {e}"))
            continue
        lo, hi, total, n = min(lo, a.min()), max(hi, a.max()), total + a.mean(), n + 1
    if n:
        info.sections.append(("pixel values", [f"{lo:g} to {hi:g}, mean {total / n:.1f} (of {n} decoded images)"]))
    info.facts = {"classes": list(class_names), "counts": counts,
                  "sizes": [{"height": h, "width": w, "images": k} for (w, h), k in sizes],
                  "modes": check.modes, "pixel_range": [lo, hi] if n else None}
    return info


# ---------------------------------------------------------------- texts


def _text_folder(path: str) -> PathInfo:
    from zoo.data.labelled_text import list_text_folder

    info = PathInfo(path, "text folder")
    try:
        texts, labels, skipped = list_text_folder(path)
    except DataError as e:
        info.problem = str(e)
        return info
    info.skipped = list(skipped)
    counts = _count(labels)
    words = np.array([len(t.split()) for t in texts])
    info.sections.append((f"classes ({len(counts)})", [f"{c}: {n} texts" for c, n in sorted(counts.items())]))
    info.sections.append(("text lengths (words)", [
        f"min {words.min()}, median {int(np.median(words))}, 95th percentile {int(np.percentile(words, 95))}, "
        f"max {words.max()}"]))
    info.facts = {"classes": sorted(counts), "counts": counts,
                  "words": {"min": int(words.min()), "median": float(np.median(words)), "max": int(words.max())}}
    return info


# ---------------------------------------------------------------- tables and series


def _table_file(path: str) -> PathInfo:
    import pandas as pd

    from zoo.data.tables import mixed_type_problem, read_table
    from zoo.data.timeseries import find_time_column

    info = PathInfo(path, "table")
    try:
        frame, source, skipped = read_table(path, with_skipped=True)
    except DataError as e:
        info.problem = str(e)
        return info
    info.skipped = list(skipped)
    lines, columns = [], {}
    for col in frame.columns:
        series = frame[col]
        missing = int(series.isna().sum())
        entry = {"missing": missing, "distinct": int(series.nunique(dropna=True))}
        if pd.api.types.is_bool_dtype(series):
            entry["type"] = "bool"
            text = "bool"
        elif pd.api.types.is_numeric_dtype(series):
            entry.update(type="integer" if pd.api.types.is_integer_dtype(series) else "real",
                         min=float(series.min()), max=float(series.max()), mean=float(series.mean()))
            text = f"{entry['type']}, {entry['min']:g} to {entry['max']:g} (mean {entry['mean']:.4g})"
        else:
            problem = mixed_type_problem(series)
            entry["type"] = "mixed" if problem else "text"
            examples = ", ".join(repr(v) for v in series.dropna().astype(str).unique()[:3])
            text = f"mixed: {problem}" if problem else f"text, {entry['distinct']} distinct (e.g. {examples})"
        if missing:
            text += f"; {missing} missing (first at row {int(np.flatnonzero(series.isna().to_numpy())[0])})"
        lines.append(f"{col}: {text}")
        columns[str(col)] = entry
    info.sections.append((f"{len(frame)} rows, {len(frame.columns)} columns", lines))
    info.facts = {"rows": len(frame), "columns": columns}
    time_col = find_time_column(frame)
    if time_col is not None:
        times = frame[time_col]
        info.sections.append(("time", [f"column {time_col!r}: {times.iloc[0]} to {times.iloc[-1]}, {len(times)} steps "
                                       "(read as a series with --horizon N)"]))
    return info
