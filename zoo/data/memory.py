"""Splits held in memory as arrays, and the batch-at-a-time pipeline that feeds them.

`tf.data` pays a fixed cost per element for every stage (shuffle, map,
batch), which caps the examples per second whatever the example
(`results/layers/README.md`), and the first epoch of a cached
pipeline also pays for decoding. A split that fits in memory is therefore
kept as arrays of its *raw* values (uint8 pixels, not float32: 4x less
memory and bandwidth) and served a batch at a time:

    indices: range(n) -> shuffle (train, reshuffled every epoch, seeded) -> batch
             (a stream, `Batching.stream_from`: epoch after epoch, each a stateless permutation of
             range(n) drawn from (seed, epoch), batched on its own)
    -> gather the batch's rows from the arrays (one op per array)
    -> the dataset's per-example preprocessing, vectorized over the batch (`tf.vectorized_map`)
    -> prefetch

so the per-element cost is paid by integer indices only, and every epoch,
the first included, costs what a gather and a cast cost. Splits that do not
fit stay on the streaming path of `zoo.data.pipeline`.

That is the TensorFlow backend's path. On JAX and PyTorch the same `Arrays` are served by
`zoo.data.array_batches.ArrayBatches` (NumPy, no TensorFlow); TensorFlow is imported here only by the
functions that build a `tf.data` pipeline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from zoo.data.batches import Batching

# Rows read per batch while materializing a dataset.
_READ_BATCH = 4096


def _tree():
    """`keras.tree` (the nests of a split's arrays), imported on first use: `zoo.data.image_folder` and the other
    readers import this module, and reading a path's facts imports no Keras."""
    import keras

    return keras.tree


@dataclasses.dataclass(frozen=True)
class Arrays:
    """A split as a structure (tuple, dict or single array) of NumPy arrays sharing their first axis."""

    data: object

    def __post_init__(self):
        lengths = {len(a) for a in _tree().flatten(self.data)}
        if len(lengths) != 1:
            raise ValueError(f"Arrays of one split must share their first axis; got lengths {sorted(lengths)}.")

    def __len__(self) -> int:
        return len(_tree().flatten(self.data)[0])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in _tree().flatten(self.data))

    def slice(self, lo: int, hi: int) -> Arrays:
        return Arrays(_tree().map_structure(lambda a: a[lo:hi], self.data))

    def concat(self, other: Arrays) -> Arrays:
        return Arrays(_tree().map_structure(lambda a, b: np.concatenate([a, b]), self.data, other.data))

    def take(self, rows) -> Arrays:
        """The rows at the indices `rows`, in that order."""
        return Arrays(_tree().map_structure(lambda a: a[rows], self.data))

    def to_dataset(self):
        """The rows as an unbatched `tf.data.Dataset` (for code that needs one)."""
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices(self.data)


def materialize(ds) -> Arrays:
    """Reads an unbatched `tf.data.Dataset` of fixed-shape numeric elements into `Arrays`, in order."""
    import tensorflow as tf

    for spec in tf.nest.flatten(ds.element_spec):
        if not spec.shape.is_fully_defined() or spec.dtype == tf.string:
            raise ValueError(f"materialize needs fixed-shape numeric elements; got {ds.element_spec}.")
    chunks = [tf.nest.map_structure(np.asarray, b) for b in ds.batch(_READ_BATCH).as_numpy_iterator()]
    if not chunks:
        empty = tf.nest.map_structure(lambda s: np.zeros((0, *s.shape), s.dtype.as_numpy_dtype), ds.element_spec)
        return Arrays(empty)
    return Arrays(tf.nest.map_structure(lambda *parts: np.concatenate(parts), *chunks))


def _apply(preprocess: Callable, element):
    return preprocess(*element) if isinstance(element, tuple) else preprocess(element)


def from_memory(arrays: Arrays, batching: Batching, preprocess: Callable | None = None, shuffle: bool = False):
    """`tf.data` batches of `arrays` (preprocessed per example, vectorized over the batch); see the module
    docstring.

    Same contract as `zoo.data.pipeline.build_pipeline`: without `shuffle` the rows keep their order;
    with it every epoch is a new permutation, the same sequence of permutations for the same seed.
    """
    import tensorflow as tf

    n = len(arrays)
    data = tf.nest.map_structure(tf.constant, arrays.data)
    if batching.stream_from is not None:
        indices = _stream_indices(n, batching, shuffle)
    else:
        indices = tf.data.Dataset.range(n)
        if shuffle:
            indices = indices.shuffle(max(n, 1), seed=batching.seed, reshuffle_each_iteration=True)
        if batching.repeat:
            indices = indices.repeat()
        indices = indices.batch(batching.batch_size, drop_remainder=batching.drop_remainder)

    def gather(idx):
        batch = tf.nest.map_structure(lambda a: tf.gather(a, idx), data)
        if preprocess is None:
            return batch
        return tf.vectorized_map(lambda element: _apply(preprocess, element), batch)

    return indices.map(gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(tf.data.AUTOTUNE)


def _stream_indices(n: int, batching: Batching, shuffle: bool):
    """The row indices of the stream's batches (`Batching.stream_from`), built statelessly: epoch `e` is
    `stateless_shuffle(range(n), (seed, e))`, so every iterator of the dataset yields the same batches (a
    `shuffle(reshuffle_each_iteration=True)` gives each new iterator the next order instead)."""
    import tensorflow as tf

    first, skip = batching.stream_start(n)
    seed = tf.constant(batching.stream_seed(), tf.int64)

    def epoch(e):
        order = tf.range(n, dtype=tf.int64)
        if shuffle:
            order = tf.random.experimental.stateless_shuffle(order, seed=tf.stack([seed, e]))
        return tf.data.Dataset.from_tensor_slices(order).batch(batching.batch_size,
                                                               drop_remainder=batching.drop_remainder)

    return tf.data.Dataset.counter(first).flat_map(epoch).skip(skip)
