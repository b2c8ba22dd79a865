"""Augmentations keyed by the global batch: a stream started part-way augments every batch as the whole stream did
(what makes a resumed `--augment` run exact; the end-to-end check is tests/training/test_resume.py)."""

import numpy as np
import pytest

from zoo.data.array_batches import ArrayBatches
from zoo.data.batches import Batching
from zoo.data.memory import Arrays, from_memory
from zoo.training import augment

SPECS = ["flip", "translate:0.2"]  # translate draws twice a batch (height, width): two keys
ROWS = Arrays((np.random.default_rng(0).random((40, 12, 12, 1), np.float32), np.arange(40) % 3))


def _stream(source, skip):
    batching = Batching(8, seed=5, stream_from=skip)
    ds = from_memory(ROWS, batching, shuffle=True) if source == "tf.data" else ArrayBatches(ROWS, batching, shuffle=True)
    return augment.apply(ds, SPECS, seed=5, start=skip)


def _batches(ds, n):
    return [np.asarray(x) for (x, _), _ in zip(ds, range(n))]


@pytest.mark.parametrize("source", ["tf.data", "ArrayBatches"])
def test_a_stream_started_part_way_augments_each_batch_as_the_whole_stream(source):
    whole, part = _batches(_stream(source, 0), 12), _batches(_stream(source, 7), 5)
    assert all(np.array_equal(a, b) for a, b in zip(whole[7:], part))
    raw = [np.asarray(x) for (x, _), _ in zip(from_memory(ROWS, Batching(8, seed=5, stream_from=0), shuffle=True),
                                              range(12))]
    assert not any(np.array_equal(a, r) for a, r in zip(whole, raw))  # every batch is augmented
