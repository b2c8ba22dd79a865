"""The tf.data pipeline every zoo dataset goes through.

Order of stages (and why):

1. ``map(preprocess)`` in parallel: decode/cast/scale once.
2. ``cache()`` in memory when the preprocessed split fits (estimated from
   ``num_examples * bytes per example``): later epochs skip decoding entirely.
3. ``shuffle`` (train only), reshuffled every epoch, seeded when asked.
4. ``repeat`` (optional) before ``batch`` so every batch is full across epochs.
5. ``batch`` then ``prefetch(AUTOTUNE)``.

A split given as in-memory arrays (`zoo.data.memory.Arrays`: tables, arrays,
and decoded image splits from `zoo.data.decoded_cache`) skips all of this for
the batch-at-a-time path of `zoo.data.memory.from_memory`, whose first epoch
costs what the later ones do.

The result is a plain ``tf.data.Dataset`` of ``(x, y)`` batches: ``model.fit``
and ``tf.distribute`` strategies distribute it themselves (auto-sharding works
because the pipeline is file- or memory-based with no Python generators).
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from zoo.data import memory
from zoo.data.memory import Arrays

# Above this estimated size the preprocessed split is not cached in memory.
CACHE_LIMIT_BYTES = 2 * 1024**3
# Above this size a split's raw arrays are not held in memory (`zoo.data.memory`): they are embedded in
# the dataset's graph, which tf.distribute serializes, and a serialized graph is limited to 2 GB.
IN_MEMORY_LIMIT_BYTES = 1024**3
# Default shuffle buffer cap: full shuffle for MNIST-sized data, bounded memory beyond.
MAX_SHUFFLE_BUFFER = 100_000
DEFAULT_SHUFFLE_BUFFER = 10_000


def validate_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}.")
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


def element_nbytes(element_spec) -> Optional[int]:
    """Bytes of one element described by `element_spec`; None if shapes are dynamic."""
    total = 0
    for spec in tf.nest.flatten(element_spec):
        shape = spec.shape
        if not shape.is_fully_defined() or spec.dtype == tf.string:
            return None
        total += int(np.prod(shape.as_list(), dtype=np.int64)) * spec.dtype.size
    return total


def should_cache(num_examples: Optional[int], element_spec, limit: int = CACHE_LIMIT_BYTES) -> bool:
    """True when the preprocessed split is known to fit under `limit` bytes."""
    nbytes = element_nbytes(element_spec)
    if num_examples is None or num_examples < 0 or nbytes is None:
        return False
    return num_examples * nbytes <= limit


def build_pipeline(
    ds,
    *,
    batch_size: int,
    preprocess: Optional[Callable] = None,
    num_examples: Optional[int] = None,
    shuffle: bool = False,
    seed: Optional[int] = None,
    cache: bool = True,
    drop_remainder: bool = False,
    repeat: bool = False,
    shuffle_buffer: Optional[int] = None,
) -> tf.data.Dataset:
    """Turns a dataset of single examples into zoo's batched training pipeline.

    Args:
        ds: unbatched examples, in source order: a ``tf.data.Dataset``, or a
            `zoo.data.memory.Arrays` held in memory (served batch by batch).
        batch_size: examples per batch (global batch under tf.distribute).
        preprocess: per-example map applied once, before the cache.
        num_examples: examples in `ds` (for the cache size estimate and the
            shuffle buffer); None if unknown.
        shuffle: shuffle examples, reshuffled every epoch.
        seed: shuffle seed; with a seed, the sequence of epoch orders is
            reproducible. Under multi-worker training with
            ``AutoShardPolicy.DATA`` pass a seed so all workers agree on the order.
        cache: cache preprocessed examples in memory if they fit.
        drop_remainder: drop the last incomplete batch.
        repeat: repeat forever (then pass ``steps_per_epoch`` to ``fit``).
        shuffle_buffer: shuffle buffer size; default: the whole split up to
            ``MAX_SHUFFLE_BUFFER`` examples.
    """
    batch_size = validate_batch_size(batch_size)
    shuffle_buffer = validate_optional_positive_int(shuffle_buffer, "shuffle_buffer")
    seed = validate_seed(seed)

    if isinstance(ds, Arrays):
        return memory.from_memory(ds, batch_size=batch_size, preprocess=preprocess, shuffle=shuffle, seed=seed,
                                  drop_remainder=drop_remainder, repeat=repeat)
    # Order matters for eval (and for seeded runs); only an unseeded shuffle may
    # trade order for throughput.
    deterministic = not shuffle or seed is not None

    if preprocess is not None:
        ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    if cache and should_cache(num_examples, ds.element_spec):
        ds = ds.cache()
    if shuffle:
        if shuffle_buffer is None:
            known = num_examples is not None and num_examples > 0
            shuffle_buffer = min(num_examples, MAX_SHUFFLE_BUFFER) if known else DEFAULT_SHUFFLE_BUFFER
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    ds = ds.batch(
        batch_size,
        drop_remainder=drop_remainder,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    ds = ds.prefetch(tf.data.AUTOTUNE)

    options = tf.data.Options()
    options.deterministic = deterministic
    options.experimental_optimization.map_parallelization = True
    options.experimental_optimization.parallel_batch = True
    return ds.with_options(options)


def from_arrays(
    x,
    y=None,
    batch_size: int = 128,
    *,
    shuffle: bool = False,
    seed: Optional[int] = None,
    cache: bool = True,
    drop_remainder: bool = False,
    repeat: bool = False,
) -> tf.data.Dataset:
    """In-memory arrays as a zoo dataset: batches of ``(x, y)`` (or ``x`` if y is None).

    `x` may be an array or a (nested) dict/tuple of arrays with the same first
    dimension. Dtypes are normalised once with NumPy (floats -> float32, integer
    labels -> int32); values are otherwise untouched (scale images yourself).
    Without shuffle, order is preserved. `cache` is accepted for symmetry with
    :func:`zoo.data.load`; arrays are already in memory and need no
    preprocessing, so there is nothing to cache.
    """
    batch_size = validate_batch_size(batch_size)
    seed = validate_seed(seed)
    if x is None:
        raise ValueError("from_arrays needs x (an array or a dict/tuple of arrays), got None.")
    x = tf.nest.map_structure(_as_input_array, x)
    lengths = {len(a) for a in tf.nest.flatten(x)}
    if y is not None:
        y = tf.nest.map_structure(_as_label_array, y)
        lengths |= {len(a) for a in tf.nest.flatten(y)}
    if len(lengths) != 1:
        raise ValueError(
            f"x and y must have the same number of examples (first dimension), got lengths {sorted(lengths)}."
        )
    n = lengths.pop()
    rows = Arrays(x if y is None else (x, y))
    ds = rows if rows.nbytes <= IN_MEMORY_LIMIT_BYTES else rows.to_dataset()
    return build_pipeline(
        ds,
        batch_size=batch_size,
        num_examples=n,
        shuffle=bool(shuffle),
        seed=seed,
        cache=False,  # see docstring: nothing to cache for in-memory arrays
        drop_remainder=drop_remainder,
        repeat=repeat,
    )


def _as_input_array(a) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim == 0:
        raise ValueError(f"from_arrays needs arrays with a first (example) dimension, got a scalar {a!r}.")
    if a.dtype.kind == "f" and a.dtype != np.float32:
        a = a.astype(np.float32)  # Keras computes in float32; float64 doubles memory for nothing
    return a


def _as_label_array(a) -> np.ndarray:
    a = _as_input_array(a)
    if a.dtype.kind in "iu" and a.dtype != np.int32:
        a = a.astype(np.int32)
    return a


def num_batches(num_examples: int, batch_size: int, drop_remainder: bool) -> int:
    """Batches per epoch for `num_examples` examples."""
    if drop_remainder:
        return num_examples // batch_size
    return math.ceil(num_examples / batch_size)
