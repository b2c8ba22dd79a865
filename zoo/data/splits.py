"""Named splits of one data source, each turned into zoo's batched pipeline on demand.

The sources that read user data (tables, image folders, text files, series)
and the bundled datasets all return a :class:`SplitData`: per split, the
unbatched examples and their count, plus what a model or a report needs to
know (input shape, classes, and per source: fitted statistics, a vocabulary,
class names). ``data.train`` / ``data.validation`` / ``data.test`` are the
batches :func:`zoo.data.pipeline.build_pipeline` makes (``tf.data`` on the
TensorFlow backend, `zoo.data.array_batches.ArrayBatches` on JAX and PyTorch), so
caching, train-only shuffling and prefetching are the same as for ``load``.

Also here: the two ways zoo splits data, with a fixed seed or in time order.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Callable, Optional

import numpy as np

from zoo.data import pipeline
from zoo.data.batches import BATCHING_FIELDS, Batching
from zoo.data.memory import Arrays
from zoo.data.tfds_source import UnknownSplitError

TRAIN = "train"


class DeferredParts(Mapping):
    """A `SplitData`'s parts whose examples are made on first use: ``build() -> {split: (examples, n)}``.

    The split names and sizes are known up front (`sizes`), so a plan reads them without making the
    examples, which decodes files and picks the backend's batch source (`tf.data` imports TensorFlow).
    """

    def __init__(self, sizes: Mapping[str, int], build: Callable[[], Mapping[str, tuple]]):
        self.sizes = dict(sizes)
        self._build = build
        self._parts: Optional[Mapping[str, tuple]] = None

    def __getitem__(self, name):
        if name not in self.sizes:
            raise KeyError(name)
        if self._parts is None:
            self._parts = self._build()
        return self._parts[name]

    def __iter__(self):
        return iter(self.sizes)

    def __len__(self):
        return len(self.sizes)

    def __contains__(self, name):
        return name in self.sizes


_PART = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*(?:\[\s*(-?\d+%?)?\s*:\s*(-?\d+%?)?\s*\])?\s*$")


@dataclasses.dataclass(frozen=True)
class SplitData:
    """Splits of one source, with the pipeline settings used by ``train``/``validation``/``test``.

    Attributes:
        name: what the data is called in messages (a dataset name or a path).
        parts: split name -> ``(unbatched examples, number of examples)``: `zoo.data.memory.Arrays`
            held in memory, or a ``tf.data.Dataset`` of ``(x, y)``.
        input_shape: shape of one x, no batch dimension.
        num_classes: classes of y, or None for regression targets.
        batching: the defaults of :meth:`dataset` (`zoo.data.Batching`; ``shuffle=None`` shuffles
            the train split only).
        preprocess: per-example ``(x, y) -> (x, y)`` applied when batches are made (e.g. uint8
            pixels held in memory -> float32), None when the parts are ready as they are; a
            `zoo.data.batches.Preprocess` where the parts are served without TensorFlow too.
    """

    name: str
    parts: Mapping[str, tuple]
    input_shape: tuple
    num_classes: Optional[int] = None
    batching: Batching = Batching()
    preprocess: Optional[Callable] = None

    def __getattr__(self, name):
        if name in BATCHING_FIELDS:  # data.batch_size, data.seed, ...: the batching's
            return getattr(self.batching, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def rebatched(self, batching: Optional[Batching] = None, **settings) -> "SplitData":
        """The same splits with other batching defaults (`settings`: `Batching`'s fields)."""
        return dataclasses.replace(self, batching=Batching.of(batching or self.batching, **settings))

    @property
    def split_names(self) -> list[str]:
        return list(self.parts)

    @property
    def num_examples(self) -> dict:
        """Split name -> number of examples."""
        if isinstance(self.parts, DeferredParts):
            return {name: int(n) for name, n in self.parts.sizes.items()}
        return {name: int(n) for name, (_, n) in self.parts.items()}

    def examples(self, split: str) -> tuple:
        """``(unbatched dataset, count)`` for a split spec: ``"train"``, ``"train+validation"``,
        ``"test[:100]"``, ``"train[:90%]"``."""
        if not isinstance(split, str) or not split.strip():
            raise ValueError(f"split must be a non-empty string like 'train' or 'test', got {split!r}.")
        result, total = None, 0
        for part in split.split("+"):
            m = _PART.match(part)
            if m is None:
                raise ValueError(f"Invalid split spec {split!r} for {self.name!r}: cannot parse {part!r}.")
            name, start, stop = m.groups()
            if name not in self.parts:
                raise UnknownSplitError(
                    f"Unknown split {name!r} in {split!r} for dataset {self.name!r}. "
                    f"Available splits: {', '.join(sorted(self.parts)) or '(none)'}."
                )
            ds, n = self.parts[name]
            lo, hi = _slice_bounds(start, stop, n)
            if isinstance(ds, Arrays):
                ds = ds.slice(lo, hi) if (lo, hi) != (0, n) else ds
            else:
                ds = ds.skip(lo).take(hi - lo) if (lo, hi) != (0, n) else ds
            result = ds if result is None else _concatenate(result, ds)
            total += hi - lo
        return result, total

    def dataset(self, split: str = TRAIN, **overrides):
        """The batched ``(x, y)`` pipeline of `split`; keyword overrides replace the batching defaults
        (``batch_size``, ``shuffle``, ``seed``, ``cache``, ``drop_remainder``, ``repeat``)."""
        unknown = set(overrides) - set(BATCHING_FIELDS)
        if unknown:
            raise TypeError(f"dataset() got unexpected keyword(s): {', '.join(sorted(unknown))}.")
        batching = self.batching.replace(**overrides)
        ds, n = self.examples(split)
        shuffle = batching.shuffle if batching.shuffle is not None else is_train_split(split)
        return pipeline.build_pipeline(ds, batching, preprocess=self.preprocess, num_examples=n, shuffle=shuffle)

    def _named(self, split: str):
        return self.dataset(split) if split in self.parts else None

    @property
    def train(self):
        return self._named("train")

    @property
    def validation(self):
        return self._named("validation")

    @property
    def test(self):
        return self._named("test")


def _concatenate(a, b):
    if isinstance(a, Arrays) and isinstance(b, Arrays):
        return a.concat(b)
    as_dataset = [x.to_dataset() if isinstance(x, Arrays) else x for x in (a, b)]
    return as_dataset[0].concatenate(as_dataset[1])


def is_train_split(split: str) -> bool:
    """True when every part of a split spec is the train split ("train", "train[:90%]")."""
    parts = [p.split("[")[0].strip() for p in split.split("+")]
    return all(p == TRAIN for p in parts)


def _slice_bounds(start, stop, n: int) -> tuple:
    def bound(text, default):
        if text is None:
            return default
        value = int(round(n * int(text[:-1]) / 100)) if text.endswith("%") else int(text)
        return max(0, min(n, value + n if value < 0 else value))

    lo, hi = bound(start, 0), bound(stop, n)
    return lo, max(lo, hi)


def arrays_dataset(x, y) -> tuple:
    """``(examples, count)`` of in-memory arrays (floats as float32, integer labels as int32): an
    `Arrays` served batch by batch (`zoo.data.memory`), or, on the TensorFlow backend, a dataset when
    too large to embed in a graph."""
    x = np.asarray(x)
    y = np.asarray(y)
    if x.dtype.kind == "f":
        x = x.astype(np.float32)
    if y.dtype.kind == "f":
        y = y.astype(np.float32)
    elif y.dtype.kind in "iub":
        y = y.astype(np.int32)
    rows = Arrays((x, y))
    embed = rows.nbytes <= pipeline.IN_MEMORY_LIMIT_BYTES or not pipeline.uses_tf_data()
    return (rows if embed else rows.to_dataset()), len(x)


def validate_fractions(fractions: Mapping[str, float]) -> dict:
    """Checks split fractions (each in [0, 1), summing below 1); returns the non-zero ones."""
    out = {}
    for name, value in fractions.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0 <= value < 1:
            raise ValueError(f"{name} must be a fraction in [0, 1), got {value!r}.")
        if value:  # a zero fraction means "no such split"
            out[name] = float(value)
    if sum(out.values()) >= 1:
        raise ValueError(f"Split fractions {out} leave nothing for training; they must sum below 1.")
    return out


def random_split(n: int, fractions: Mapping[str, float], seed: int = 0, labels=None) -> dict:
    """Row indices per split, drawn with `seed` (stratified by `labels` when given).

    `fractions` maps the held-out splits (e.g. ``{"validation": 0.15, "test": 0.2}``)
    to fractions of all rows; the rest is ``"train"``. Indices keep source order
    within each split.
    """
    fractions = validate_fractions(fractions)
    rng = np.random.default_rng(seed)
    groups = [np.arange(n)] if labels is None else [np.flatnonzero(labels == c) for c in np.unique(labels)]
    out = {name: [] for name in (TRAIN, *fractions)}
    for group in groups:
        order = rng.permutation(group)
        used = 0
        for name, fraction in fractions.items():
            k = int(round(fraction * len(group)))
            out[name].append(order[used : used + k])
            used += k
        out[TRAIN].append(order[used:])
    return {name: np.sort(np.concatenate(parts)).astype(np.int64) for name, parts in out.items()}


def chronological_bounds(n: int, fractions: Mapping[str, float]) -> dict:
    """Split name -> ``(start, stop)`` positions of consecutive periods: train first, then the
    held-out splits in the order given (e.g. validation, then test at the end)."""
    fractions = validate_fractions(fractions)
    sizes = {name: int(np.floor(n * f)) for name, f in fractions.items()}
    start = n - sum(sizes.values())
    bounds = {TRAIN: (0, start)}
    for name, size in sizes.items():
        bounds[name] = (start, start + size)
        start += size
    return bounds
