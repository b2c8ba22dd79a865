"""The tf.data pipeline every zoo dataset goes through.

Order of stages (and why):

1. ``map(preprocess)`` in parallel: decode/cast/scale once.
2. ``cache()`` in memory when the preprocessed split fits (estimated from
   ``num_examples * bytes per example``): later epochs skip decoding entirely.
3. ``shuffle`` (train only), reshuffled every epoch, seeded when asked.
4. ``repeat`` (optional) before ``batch`` so every batch is full across epochs.
5. ``batch`` then ``prefetch(AUTOTUNE)``.

A stream (`zoo.data.batches.Batching.stream_from`, what a training run is fed) replaces 3-5 by
epoch after epoch of the cached examples, each shuffled with a seed drawn from ``(seed, epoch)`` and
batched on its own: every iterator of it yields the same batches.

A split given as in-memory arrays (`zoo.data.memory.Arrays`: tables, arrays,
and decoded image splits from `zoo.data.decoded_cache`) skips all of this for
the batch-at-a-time path of `zoo.data.memory.from_memory`, whose first epoch
costs what the later ones do.

The result is a plain ``tf.data.Dataset`` of ``(x, y)`` batches: ``model.fit``
and ``tf.distribute`` strategies distribute it themselves (auto-sharding works
because the pipeline is file- or memory-based with no Python generators).

On the JAX and PyTorch backends a split held in memory is served by
`zoo.data.array_batches.ArrayBatches` instead (NumPy, no TensorFlow); TensorFlow is imported
only where a `tf.data` pipeline is built.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from zoo.data import memory
from zoo.data.batches import (  # noqa: F401  (the validators are part of this module's API)
    Batching,
    takes_batching,
    uses_tf_data,
    validate_batch_size,
    validate_optional_positive_int,
    validate_seed,
)
from zoo.data.memory import Arrays

# Above this estimated size the preprocessed split is not cached in memory.
CACHE_LIMIT_BYTES = 2 * 1024**3
# Above this size a split's raw arrays are not held in memory (`zoo.data.memory`): they are embedded in
# the dataset's graph, which tf.distribute serializes, and a serialized graph is limited to 2 GB.
IN_MEMORY_LIMIT_BYTES = 1024**3
# Default shuffle buffer cap: full shuffle for MNIST-sized data, bounded memory beyond.
MAX_SHUFFLE_BUFFER = 100_000
DEFAULT_SHUFFLE_BUFFER = 10_000


def element_nbytes(element_spec) -> Optional[int]:
    """Bytes of one element described by `element_spec`; None if shapes are dynamic."""
    import tensorflow as tf

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
    batching: Batching,
    *,
    preprocess: Optional[Callable] = None,
    num_examples: Optional[int] = None,
    shuffle: bool = False,
    shuffle_buffer: Optional[int] = None,
):
    """Turns a split's single examples into zoo's batches.

    Args:
        ds: unbatched examples, in source order: a ``tf.data.Dataset``, or a
            `zoo.data.memory.Arrays` held in memory (served batch by batch).
        batching: batch size, seed, drop_remainder, repeat, cache (`zoo.data.batches.Batching`).
            With a seed the sequence of epoch orders is reproducible; under multi-worker training
            with ``AutoShardPolicy.DATA`` pass a seed so all workers agree on the order.
        preprocess: per-example map applied once, before the cache.
        num_examples: examples in `ds` (for the cache size estimate and the
            shuffle buffer); None if unknown.
        shuffle: shuffle examples, reshuffled every epoch (`batching.shuffle` resolved for this split).
        shuffle_buffer: shuffle buffer size; default: the whole split up to
            ``MAX_SHUFFLE_BUFFER`` examples.

    Returns a ``tf.data.Dataset`` on the TensorFlow backend; on JAX and PyTorch, in-memory rows
    become a `zoo.data.array_batches.ArrayBatches` (a ``keras.utils.PyDataset``).
    """
    shuffle_buffer = validate_optional_positive_int(shuffle_buffer, "shuffle_buffer")
    if isinstance(ds, Arrays):
        if not uses_tf_data():
            from zoo.data.array_batches import ArrayBatches

            return ArrayBatches(ds, batching, preprocess, shuffle=shuffle)
        return memory.from_memory(ds, batching, preprocess, shuffle)
    import tensorflow as tf

    # Order matters for eval (and for seeded runs); only an unseeded shuffle may
    # trade order for throughput.
    seed = batching.seed
    deterministic = not shuffle or seed is not None

    if preprocess is not None:
        ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    if batching.cache and should_cache(num_examples, ds.element_spec):
        ds = ds.cache()
    if shuffle and shuffle_buffer is None:
        known = num_examples is not None and num_examples > 0
        shuffle_buffer = min(num_examples, MAX_SHUFFLE_BUFFER) if known else DEFAULT_SHUFFLE_BUFFER

    def batched(examples):
        return examples.batch(batching.batch_size, drop_remainder=batching.drop_remainder,
                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)

    if batching.stream_from is not None:
        ds = _stream(ds, batching, num_examples, shuffle_buffer if shuffle else None, batched)
    else:
        if shuffle:
            ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        if batching.repeat:
            ds = ds.repeat()
        ds = batched(ds)
    ds = ds.prefetch(tf.data.AUTOTUNE)

    options = tf.data.Options()
    options.deterministic = deterministic
    options.experimental_optimization.map_parallelization = True
    options.experimental_optimization.parallel_batch = True
    return ds.with_options(options)


def _stream(examples, batching: Batching, num_examples: Optional[int], shuffle_buffer: Optional[int], batched):
    """The stream of `examples` (`Batching.stream_from`): epoch `e` shuffled (when `shuffle_buffer`) with a
    seed drawn from `(seed, e)`, a new shuffle per epoch that does not reshuffle, so the order depends on the
    epoch alone and not on how many iterators the dataset had before. The cached examples stay cached: every
    epoch reads the one cache, as a `shuffle(...).repeat()` would."""
    import tensorflow as tf

    if num_examples is None or num_examples < 0:
        known = int(examples.cardinality())
        if known < 0:
            raise ValueError("stream_from needs the split's number of examples (num_examples), to know where an "
                             "epoch ends; it is unknown here.")
        num_examples = known
    first, skip = batching.stream_start(num_examples)
    seed = tf.constant(batching.stream_seed(), tf.int64)

    def epoch(e):
        if shuffle_buffer is None:
            return batched(examples)
        epoch_seed = tf.random.stateless_uniform([], tf.stack([seed, e]), minval=None, maxval=None, dtype=tf.int64)
        # `Dataset.shuffle` pairs its seed with the graph's: fix this function graph's, so the order is drawn from
        # (seed, e) alone whatever the global seed, and a global seed of 0 does not make TensorFlow test the
        # tensor seed as a Python bool (random_seed.get_seed's `seeds == (0, 0)`).
        tf.random.set_seed(1)
        return batched(examples.shuffle(shuffle_buffer, seed=epoch_seed, reshuffle_each_iteration=False))

    return tf.data.Dataset.counter(first).flat_map(epoch).skip(skip)


@takes_batching(shuffle=False)
def from_arrays(x, y=None, batch_size: int = 128, *, batching: Batching):
    """In-memory arrays as a zoo dataset: batches of ``(x, y)`` (or ``x`` if y is None).

    `x` may be an array or a (nested) dict/tuple of arrays with the same first
    dimension. Dtypes are normalised once with NumPy (floats -> float32, integer
    labels -> int32); values are otherwise untouched (scale images yourself).
    Without shuffle (the default here), order is preserved; ``cache`` has nothing to cache: the
    arrays are in memory already.
    """
    batching = batching.replace(batch_size=batch_size)
    if x is None:
        raise ValueError("from_arrays needs x (an array or a dict/tuple of arrays), got None.")
    import keras

    x = keras.tree.map_structure(_as_input_array, x)
    lengths = {len(a) for a in keras.tree.flatten(x)}
    if y is not None:
        y = keras.tree.map_structure(_as_label_array, y)
        lengths |= {len(a) for a in keras.tree.flatten(y)}
    if len(lengths) != 1:
        raise ValueError(
            f"x and y must have the same number of examples (first dimension), got lengths {sorted(lengths)}."
        )
    n = lengths.pop()
    rows = Arrays(x if y is None else (x, y))
    ds = rows if rows.nbytes <= IN_MEMORY_LIMIT_BYTES or not uses_tf_data() else rows.to_dataset()
    return build_pipeline(ds, batching.replace(cache=False), num_examples=n, shuffle=bool(batching.shuffle))


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
