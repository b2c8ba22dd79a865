"""The in-memory pipeline and the decoded cache against the streaming tf.data pipeline they replace."""

import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import zoo.data
from tests.data.test_datasets import fake_mnist_dir  # noqa: F401 (a fixture)
from zoo.data import decoded_cache, memory, pipeline, preprocessing
from zoo.data.batches import Batching


def batches(ds):
    return [tuple(np.asarray(t) for t in b) for b in ds]


def arrays(n=10):
    x = (np.arange(n * 4, dtype=np.uint8) % 251).reshape(n, 2, 2, 1)
    return memory.Arrays((x, np.arange(n, dtype=np.int64)))


def test_unshuffled_batches_equal_the_streaming_pipeline():
    rows = arrays()
    stream = pipeline.build_pipeline(rows.to_dataset(), Batching(4, cache=False), preprocess=preprocessing.scale_image)
    held = memory.from_memory(rows, Batching(4), preprocess=preprocessing.scale_image)
    for (xs, ys), (xm, ym) in zip(batches(stream), batches(held), strict=True):
        np.testing.assert_array_equal(xm, xs)
        np.testing.assert_array_equal(ym, ys)
        assert xm.dtype == np.float32 and ym.dtype == np.int32


def test_shuffle_is_a_new_permutation_each_epoch_and_seeded():
    rows = arrays(50)

    def epochs(seed):
        ds = memory.from_memory(rows, Batching(8, seed=seed), shuffle=True)
        return [np.concatenate([y for _, y in batches(ds)]) for _ in range(2)]

    first, second = epochs(0)
    assert sorted(first) == list(range(50)) and sorted(second) == list(range(50))
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(epochs(0)[0], first)


@pytest.mark.parametrize("path", ["memory", "streaming"])
def test_a_stream_gives_the_same_batches_to_every_iterator_and_resumes_exactly(path):
    """The bug it guards: TensorFlow's `fit` under a strategy iterates its dataset once more, and a
    `shuffle(reshuffle_each_iteration=True)` then moved every later epoch to another order (resume not exact)."""
    rows = arrays(10)
    tf.random.set_seed(0)  # a global seed of 0 once made the per-epoch shuffle test a tensor as a bool

    def stream(start):
        batching = Batching(4, seed=5, stream_from=start)
        if path == "memory":
            return memory.from_memory(rows, batching, shuffle=True)
        return pipeline.build_pipeline(rows.to_dataset(), batching, num_examples=10, shuffle=True)

    def labels(ds, n):
        return [y for _, y in batches(ds.take(n))]

    whole = stream(0)
    first = labels(whole, 9)  # 3 epochs of 3 batches (4, 4, 2)
    for a, b in zip(labels(whole, 9), first, strict=True):  # a second iterator: the same batches
        np.testing.assert_array_equal(a, b)
    epochs = [np.concatenate(first[e * 3:e * 3 + 3]) for e in range(3)]
    assert all(sorted(e) == list(range(10)) for e in epochs) and not np.array_equal(epochs[0], epochs[1])
    for a, b in zip(labels(stream(4), 5), first[4:], strict=True):
        np.testing.assert_array_equal(a, b)


def test_drop_remainder_and_repeat():
    rows = arrays(10)
    assert [len(y) for _, y in batches(memory.from_memory(rows, Batching(4, drop_remainder=True)))] == [4, 4]
    ds = memory.from_memory(rows, Batching(4, repeat=True, drop_remainder=True)).take(5)
    assert len(batches(ds)) == 5


def test_cache_round_trip_is_atomic_and_rebuilds_a_stale_file(tmp_path):
    rows = arrays()
    path = tmp_path / "c" / "split.npz"
    calls = []

    def build():
        calls.append(1)
        return rows

    first = decoded_cache.load_or_build(path, build)
    again = decoded_cache.load_or_build(path, build)
    assert len(calls) == 1 and path.is_file() and not [p for p in path.parent.iterdir() if p.name.startswith(".tmp")]
    for a, b in zip(first.data, again.data):
        np.testing.assert_array_equal(a, b)
    decoded_cache.load_or_build(path, build, rows=11)  # the stored file has 10 rows: built again
    assert len(calls) == 2


def test_tfds_split_from_the_cache_equals_the_streaming_read(fake_mnist_dir):  # noqa: F811
    streamed = batches(zoo.data.load("mnist", "test", batch_size=32, data_dir=fake_mnist_dir, cache=False))
    cold = batches(zoo.data.load("mnist", "test", batch_size=32, data_dir=fake_mnist_dir))
    assert list(Path(fake_mnist_dir, "zoo_decoded").rglob("test-*.npz")), "the first load writes the decoded split"
    warm = batches(zoo.data.load("mnist", "test", batch_size=32, data_dir=fake_mnist_dir))
    for got in (cold, warm):
        for (xs, ys), (xm, ym) in zip(streamed, got, strict=True):
            np.testing.assert_array_equal(xm, xs)
            np.testing.assert_array_equal(ym, ys)


def test_image_folder_cache_is_within_rounding_and_follows_file_changes(tmp_path):
    from PIL import Image

    root = tmp_path / "shapes"
    rng = np.random.default_rng(0)
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (9, 7, 3), dtype=np.uint8)).save(root / label / f"{i}.png")

    def pixels(cache):
        data = zoo.data.from_image_folder(root, image_size=(5, 6), cache=cache)
        return np.concatenate([x for x, _ in batches(data.dataset("train", shuffle=False))])

    exact = pixels(cache=False)
    cached = pixels(cache=True)
    assert cached.dtype == np.float32 and cached.shape == exact.shape
    np.testing.assert_allclose(cached, exact, atol=0.5 / 255 + 1e-6)  # uint8 rounding of the resize
    # A changed file is decoded again (its size and time are in the key).
    Image.fromarray(np.zeros((9, 7, 3), np.uint8)).save(root / "a" / "0.png")
    os.utime(root / "a" / "0.png", ns=(1, 1))
    assert pixels(cache=True)[0].max() == 0.0


def test_tables_are_served_from_memory():
    import pandas as pd

    frame = pd.DataFrame({"x": np.arange(20, dtype=float), "y": np.arange(20) % 2})
    data = zoo.data.from_table(frame, target="y", standardize=False)
    examples, n = data.examples("train")
    assert isinstance(examples, memory.Arrays) and n == 20
    x, _ = zip(*batches(data.dataset("train", shuffle=False, batch_size=8)))
    np.testing.assert_array_equal(np.concatenate(x)[:, 0], np.arange(20))


@pytest.mark.parametrize("n", [0, 3])
def test_materialize_keeps_order_and_handles_empty(n):
    ds = tf.data.Dataset.from_tensor_slices((np.arange(n, dtype=np.int32), np.arange(n, dtype=np.float32)))
    rows = memory.materialize(ds)
    assert len(rows) == n
    np.testing.assert_array_equal(rows.data[0], np.arange(n))
