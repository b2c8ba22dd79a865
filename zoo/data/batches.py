"""How a split becomes batches (`Batching`, passed whole), and the batch source that needs no TensorFlow.

Every reader in `zoo.data` serves its splits through one of two batch sources:

- on the TensorFlow backend, a `tf.data` pipeline (`zoo.data.pipeline`, `zoo.data.memory.from_memory`);
- on JAX and PyTorch, for splits held in memory (`zoo.data.memory.Arrays`), `ArrayBatches` below: a
  `keras.utils.PyDataset` that gathers each batch's rows with NumPy and preprocesses the whole batch
  at once, so a process on those backends never imports TensorFlow. Keras takes both kinds on every
  backend (https://keras.io/api/utils/python_utils/#pydataset-class).

A training run is fed the split's *stream* (`Batching.stream_from`): epoch after epoch without end,
batch `i` of the stream being batch `i % steps` of epoch `i // steps`, whose order is drawn from
`(seed, epoch)` alone. Both batch sources build it statelessly, so every iteration of a stream yields
the same batches: a resumed run that starts its stream past the batches it trained on sees exactly the
batches an uninterrupted run would, however often Keras iterates the dataset it is given (TensorFlow's
`fit` under a `tf.distribute` strategy iterates it once more to build the model, which advances a
`shuffle(reshuffle_each_iteration=True)` to its next order), and several processes of one data-parallel
run (`shard`) each take their rows of the same global batch.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import math
from collections.abc import Callable
from typing import Optional

import keras
import numpy as np

# The settings that turn a split into batches, declared once (each reader takes them by keyword).
BATCHING_FIELDS = ("batch_size", "shuffle", "seed", "cache", "drop_remainder", "repeat", "stream_from")


def validate_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    return int(batch_size)


def validate_optional_positive_int(value, what: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{what} must be a positive integer or None, got {value!r}.")
    return int(value)


def validate_seed(seed) -> Optional[int]:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}.")
    return int(seed)


@dataclasses.dataclass(frozen=True)
class Batching:
    """How a split becomes batches; one object passed whole from a reader to the batch source.

    Attributes:
        batch_size: examples per batch (the global batch under a distribution).
        shuffle: shuffle the examples, a new order every epoch; None shuffles the train split only.
        seed: makes the sequence of epoch orders reproducible.
        cache: keep preprocessed examples in memory where they fit (streaming `tf.data` splits).
        drop_remainder: drop each epoch's last, incomplete batch.
        repeat: repeat forever (then give `fit` a `steps_per_epoch`); examples are repeated before they are
            batched, so every batch is full.
        stream_from: the split's endless stream from global batch `stream_from` on (see the module
            docstring): each epoch batched on its own and ordered from `(seed, epoch)`, the same batches
            however often it is iterated. The skipped epochs cost nothing. What a training run (exact
            resume) is fed; None: one epoch (or `repeat`).
    """

    batch_size: int = 128
    shuffle: Optional[bool] = None
    seed: Optional[int] = None
    cache: bool = True
    drop_remainder: bool = False
    repeat: bool = False
    stream_from: Optional[int] = None

    def __post_init__(self):
        validate_batch_size(self.batch_size)
        validate_seed(self.seed)
        if self.shuffle is not None and not isinstance(self.shuffle, bool):
            raise ValueError(f"shuffle must be True, False or None, got {self.shuffle!r}.")
        for name in ("cache", "drop_remainder", "repeat"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        object.__setattr__(self, "batch_size", int(self.batch_size))
        if self.stream_from is not None:
            if isinstance(self.stream_from, bool) or not isinstance(self.stream_from, (int, np.integer)) \
                    or self.stream_from < 0:
                raise ValueError(f"stream_from must be a non-negative integer (a global batch) or None, got "
                                 f"{self.stream_from!r}.")
            if self.repeat:
                raise ValueError("repeat=True and stream_from are two kinds of endless batches: repeat repeats "
                                 "the examples before batching them, stream_from gives epoch after epoch, each "
                                 "batched and ordered on its own. Give one.")
            object.__setattr__(self, "stream_from", int(self.stream_from))

    def replace(self, **changes) -> "Batching":
        unknown = set(changes) - set(BATCHING_FIELDS)
        if unknown:
            raise TypeError(f"Unknown batching setting(s) {sorted(unknown)}; the settings are {', '.join(BATCHING_FIELDS)}.")
        return dataclasses.replace(self, **changes) if changes else self

    def steps(self, num_examples: int) -> int:
        """Batches per epoch for `num_examples` examples."""
        return num_examples // self.batch_size if self.drop_remainder else math.ceil(num_examples / self.batch_size)

    def stream_start(self, num_examples: int) -> tuple[int, int]:
        """`(epoch, batch in that epoch)` where the stream of `num_examples` examples starts (`stream_from`)."""
        steps = self.steps(num_examples)
        if steps == 0:
            raise ValueError(f"A stream of {num_examples} examples in batches of {self.batch_size} with "
                             f"drop_remainder=True has no batch: give a smaller batch_size or drop_remainder=False.")
        return divmod(self.stream_from or 0, steps)

    def stream_seed(self) -> int:
        """The seed every epoch's order of the stream is drawn from with the epoch: `seed`, or fresh entropy."""
        return self.seed if self.seed is not None else int(np.random.SeedSequence().entropy % 2**63)

    @classmethod
    def of(cls, batching: "Batching | None" = None, **settings) -> "Batching":
        """`batching` (or the defaults) with the loose keyword `settings` a caller gave applied."""
        given = {k: v for k, v in settings.items() if v is not _UNSET}
        return (batching or cls()).replace(**given)


_UNSET = object()


def takes_batching(**defaults):
    """Lets a reader declared as `fn(..., batching: Batching)` also take `Batching`'s fields as keywords.

    `fn(data, batch_size=32, seed=0)` becomes `fn(data, batching=Batching(32, seed=0))`; a field the
    reader declares itself (a positional `batch_size`) stays its own. `defaults` are this reader's
    (images batch by 32). The fields are declared once, on `Batching`; the reader's signature (`help`,
    IDEs) lists them, derived from it.
    """

    def wrap(fn):
        own = inspect.signature(fn)
        fields = [f for f in BATCHING_FIELDS if f not in own.parameters]
        base = Batching(**defaults)

        @functools.wraps(fn)
        def reader(*args, batching: "Batching | None" = None, **kwargs):
            settings = {f: kwargs.pop(f) for f in fields if f in kwargs}
            return fn(*args, batching=(batching or base).replace(**settings), **kwargs)

        params = [p for name, p in own.parameters.items() if name != "batching"]
        keyword = inspect.Parameter.KEYWORD_ONLY
        extra = [inspect.Parameter(f, keyword, default=getattr(base, f)) for f in fields]
        batching = inspect.Parameter("batching", keyword, default=None)
        reader.__signature__ = own.replace(parameters=[*params, *extra, batching])
        reader.__doc__ = (fn.__doc__ or "") + (f"\n\n    Batching (`zoo.data.Batching`, or its fields as keywords: "
                                               f"{', '.join(fields)}): defaults {base}.\n")
        return reader

    return wrap


def uses_tf_data() -> bool:
    """Whether splits are served as `tf.data` (the TensorFlow backend) or as `ArrayBatches` (JAX, PyTorch)."""
    return keras.backend.backend() == "tensorflow"


@dataclasses.dataclass(frozen=True)
class Preprocess:
    """One preprocessing step in its two forms: per example as TensorFlow ops (inside `tf.data`), and
    per batch as NumPy (`ArrayBatches`). Calling it runs the TensorFlow form, as a `tf.data` map does.

    Both take and return `(x, y)`; the NumPy form gets every example of the batch stacked.
    """

    name: str
    tf: Callable
    numpy: Callable

    def __call__(self, *element):
        return self.tf(*element)


class ArrayBatches(keras.utils.PyDataset):
    """Batches of in-memory arrays (`zoo.data.memory.Arrays`) for `fit`/`evaluate` on any backend.

    Args:
        arrays: the split's rows (raw values: uint8 pixels, token ids, window starts).
        batching: the `Batching` (its `cache` does not apply: the rows are in memory already).
        preprocess: a `Preprocess` whose NumPy form maps each whole batch, or None.
        shuffle: whether this split is shuffled (`batching.shuffle` resolved for the split).
        augment: `augment(x, batch)` applied to each training batch's x after `preprocess` (Keras random
            layers); `batch` is its number in the stream (`skip + i`), which keys its random draws.

    Use it as Keras uses a `PyDataset`: `len(batches)` batches per epoch, `batches[i]`; `stream(skip)`
    is the endless stream from global batch `skip` (exact resume); `shard(index, count)` the rows of
    each global batch that process `index` of `count` feeds (multi-process data parallelism).
    """

    def __init__(self, arrays, batching: Batching, preprocess: Optional[Preprocess] = None, *,
                 shuffle: bool = False, augment: Optional[Callable] = None):
        super().__init__()
        if preprocess is not None and not isinstance(preprocess, Preprocess):
            raise TypeError(
                f"preprocess {getattr(preprocess, '__name__', preprocess)!r} is a per-example TensorFlow function; "
                "batches served without TensorFlow (JAX, PyTorch) need a zoo.data.batches.Preprocess with a NumPy "
                "form."
            )
        self.arrays = arrays
        self.batching = batching
        self.preprocess = preprocess
        self.shuffle = bool(shuffle)
        self.augment = augment
        self.num_examples = len(arrays)
        self.steps_per_epoch = batching.steps(self.num_examples)
        self._entropy = batching.stream_seed()
        self._order_cache: tuple[int, np.ndarray] | None = None
        if batching.stream_from is not None:
            batching.stream_start(self.num_examples)  # checks the stream has batches
        self.skip = batching.stream_from or 0
        self.endless = batching.repeat or batching.stream_from is not None
        self.shard_index, self.shard_count = 0, 1
        self.pad_to: int | None = None  # evaluation batches padded to a multiple, with zero sample weights
        self.trim_to: int | None = None  # training batches cut to a multiple

    # -- the stream -------------------------------------------------------------------------------

    def _copy(self, **changes) -> "ArrayBatches":
        other = copy.copy(self)
        other.__dict__.update(_order_cache=None, **changes)
        return other

    def stream(self, skip: int = 0) -> "ArrayBatches":
        """The endless stream of batches from global batch `skip` on (`Batching.stream_from`)."""
        batching = self.batching.replace(repeat=False, stream_from=skip)
        batching.stream_start(self.num_examples)
        return self._copy(batching=batching, skip=batching.stream_from, endless=True)

    def shard(self, index: int, count: int, pad_to: int | None = None, trim_to: int | None = None) -> "ArrayBatches":
        """Process `index` of `count`: its equal, contiguous share of every global batch.

        Every global batch is first made a multiple of the number of devices: `pad_to` pads it
        (evaluation: padded rows carry sample weight 0, so metrics are those of the real rows), `trim_to`
        leaves out the remainder rows of a last, partial batch (training).
        """
        if not 0 <= index < count:
            raise ValueError(f"shard index must be in [0, {count}), got {index}.")
        return self._copy(shard_index=int(index), shard_count=int(count), pad_to=pad_to, trim_to=trim_to)

    def with_augment(self, augment: Callable) -> "ArrayBatches":
        return self._copy(augment=augment)

    # -- the PyDataset protocol -------------------------------------------------------------------

    def __len__(self) -> int:
        return self.steps_per_epoch

    @property
    def num_batches(self):
        return None if self.endless else self.steps_per_epoch

    def _order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return None
        cached = self._order_cache
        if cached is None or cached[0] != epoch:
            rng = np.random.default_rng([self._entropy, epoch])
            cached = self._order_cache = (epoch, rng.permutation(self.num_examples))
        return cached[1]

    def rows(self, i: int) -> np.ndarray:
        """The row indices of batch `i` of this stream (all processes' rows)."""
        g = self.skip + i
        epoch, b = divmod(g, self.steps_per_epoch)
        bs = self.batching.batch_size
        order = self._order(epoch)
        lo, hi = b * bs, min((b + 1) * bs, self.num_examples)
        return np.arange(lo, hi) if order is None else order[lo:hi]

    def __getitem__(self, i: int):
        if not self.endless and not 0 <= i < self.steps_per_epoch:
            raise IndexError(f"batch {i} of {self.steps_per_epoch}")
        rows = self.rows(i)
        weights = None
        if self.pad_to:
            full = -(-len(rows) // self.pad_to) * self.pad_to
            weights = np.zeros(full, np.float32)
            weights[: len(rows)] = 1.0
            rows = np.concatenate([rows, np.full(full - len(rows), rows[0] if len(rows) else 0)])
        elif self.trim_to:
            rows = rows[: len(rows) - len(rows) % self.trim_to]
        if self.shard_count > 1:
            n = len(rows) // self.shard_count
            lo = self.shard_index * n
            rows = rows[lo: lo + n]
            weights = None if weights is None else weights[lo: lo + n]
        batch = keras.tree.map_structure(lambda a: a[rows], self.arrays.data)
        if self.preprocess is not None:
            batch = self.preprocess.numpy(*batch) if isinstance(batch, tuple) else self.preprocess.numpy(batch)
        if self.augment is not None:
            x, *rest = batch
            batch = (self.augment(x, self.skip + i), *rest)
        if weights is not None:
            batch = (*batch, weights) if isinstance(batch, tuple) else (batch, None, weights)
        return batch

    def __iter__(self):
        i = 0
        while self.endless or i < self.steps_per_epoch:
            yield self[i]
            i += 1


# -- what the run asks of either kind of batch source -----------------------------------------------


def steps_per_epoch(ds) -> Optional[int]:
    """Batches per epoch of a batch source: `ArrayBatches`, or a `tf.data.Dataset` (None: unknown or endless)."""
    if isinstance(ds, ArrayBatches):
        return ds.steps_per_epoch
    steps = int(ds.cardinality())
    return steps if steps >= 0 else None


def numpy_batches(ds):
    """The batches of one epoch of a batch source (`ArrayBatches` or `tf.data.Dataset`), as NumPy arrays."""
    if isinstance(ds, ArrayBatches):
        return iter(ds)
    return ds.as_numpy_iterator()


def first_batch(ds):
    """The first batch of a batch source, as NumPy arrays."""
    return next(iter(numpy_batches(ds)))
