"""How a split becomes batches (`Batching`, passed whole), and what a run asks of either batch source.

Every reader in `zoo.data` serves its splits through one of two batch sources:

- on the TensorFlow backend, a `tf.data` pipeline (`zoo.data.pipeline`, `zoo.data.memory.from_memory`);
- on JAX and PyTorch, for splits held in memory (`zoo.data.memory.Arrays`), `ArrayBatches`
  (`zoo.data.array_batches`): a `keras.utils.PyDataset` that gathers each batch's rows with NumPy and
  preprocesses the whole batch at once, so a process on those backends never imports TensorFlow. Keras
  takes both kinds on every backend (https://keras.io/api/utils/python_utils/#pydataset-class).

A training run is fed the split's *stream* (`Batching.stream_from`): epoch after epoch without end,
batch `i` of the stream being batch `i % steps` of epoch `i // steps`, whose order is drawn from
`(seed, epoch)` alone. Both batch sources build it statelessly, so every iteration of a stream yields
the same batches: a resumed run that starts its stream past the batches it trained on sees exactly the
batches an uninterrupted run would, however often Keras iterates the dataset it is given (TensorFlow's
`fit` under a `tf.distribute` strategy iterates it once more to build the model, which advances a
`shuffle(reshuffle_each_iteration=True)` to its next order), and several processes of one data-parallel
run (`shard`) each take their rows of the same global batch.

Keras is imported by the functions that serve batches, not here: readers declare their `Batching` at
import, and reading a path's facts (`zoo train --data PATH --dry-run`) imports no Keras.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable
from typing import Optional

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
    import keras

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


# -- what the run asks of either kind of batch source -----------------------------------------------
# Each tells them apart by a `tf.data.Dataset`'s own methods: this module imports neither (`ArrayBatches`
# imports this one, and `tf.data` TensorFlow).


def steps_per_epoch(ds) -> Optional[int]:
    """Batches per epoch of a batch source: `ArrayBatches`, or a `tf.data.Dataset` (None: unknown or endless)."""
    if not hasattr(ds, "cardinality"):  # ArrayBatches
        return ds.steps_per_epoch
    steps = int(ds.cardinality())
    return steps if steps >= 0 else None


def numpy_batches(ds):
    """The batches of one epoch of a batch source (`ArrayBatches` or `tf.data.Dataset`), as NumPy arrays."""
    if not hasattr(ds, "as_numpy_iterator"):  # ArrayBatches
        return iter(ds)
    return ds.as_numpy_iterator()


def first_batch(ds):
    """The first batch of a batch source, as NumPy arrays."""
    return next(iter(numpy_batches(ds)))
