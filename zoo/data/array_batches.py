"""`ArrayBatches`: the batch source that needs no TensorFlow, a `keras.utils.PyDataset` over arrays in memory.

What JAX and PyTorch runs are fed for splits held in memory (`zoo.data.memory.Arrays`); the stream it
serves, and why it is stateless, is `zoo.data.batches`'s module docstring. Its own module because it
subclasses a Keras class: `zoo.data.batches` (the `Batching` every reader declares) stays free of Keras.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Optional

import keras
import numpy as np

from zoo.data.batches import Batching, Preprocess


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
