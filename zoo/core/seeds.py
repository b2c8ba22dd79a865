"""Random draws keyed by where they happen (a step, a global batch), not by a generator's running state.

A `keras.random.SeedGenerator` holds a state variable that every draw advances. A resumable backup can
save that state where the draws happen in the train step, one step after another (a model's Dropout:
`zoo.training.callbacks.ResumableBackup`). It cannot where they happen in the input pipeline: `tf.data`
maps and prefetches batches ahead of the step that trains on them (and Keras may iterate a dataset once
more to build the model), so when a backup is written the generator has run past the step saved by an
unknown number of batches. A key computed from (seed, step) or (seed, global batch) has no state: a
resumed run draws for each batch what the uninterrupted run drew for it, and a batch split across
replicas or processes draws the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

import keras


class Keyed(keras.random.SeedGenerator):
    """A `SeedGenerator` with no state: its draw `k` (0, 1, ...) is keyed by `keys(k)`.

    `keras.random` takes an int (constant, so not per step or batch) or a `SeedGenerator`; one whose
    `next()` returns a key computed by the caller gives the stateless draw each backend's own function
    makes from it (`tf.random.stateless_*`, `jax.random` with that key, a seeded `torch.Generator`).
    Make one per step or batch: a layer that draws twice from it (`RandomTranslation`: height, then
    width) gets two different keys.
    """

    def __init__(self, keys: Callable[[int], object]):  # no state variable: nothing to save, sync or restore
        self._keys = keys
        self._draws = 0

    def next(self, ordered=True):
        key = self._keys(self._draws)
        self._draws += 1
        return key
