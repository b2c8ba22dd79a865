"""The batch source without TensorFlow (`zoo.data.array_batches.ArrayBatches`) against the tf.data pipeline it stands
in for on JAX and PyTorch; its NumPy preprocessing against the TensorFlow forms; Pillow decoding against
TensorFlow's; MNIST's arrays file against the prepared TFDS dataset."""

import numpy as np
import pytest
import tensorflow as tf

import zoo.data
from tests.data.test_datasets import fake_mnist_dir  # noqa: F401 (a fixture)
from zoo.data import batches, image_folder, memory, mnist_local, preprocessing
from zoo.data.array_batches import ArrayBatches
from zoo.data.batches import Batching


def rows(n=50):
    x = (np.arange(n * 12, dtype=np.int64) % 251).astype(np.uint8).reshape(n, 2, 2, 3)
    return memory.Arrays((x, np.arange(n, dtype=np.int64)))


def labels(source, steps=None):
    return np.concatenate([y for _, y in (source[i] for i in range(steps or len(source)))])


def test_unshuffled_batches_equal_the_tf_data_pipeline_with_the_numpy_forms_of_preprocessing():
    for step in (preprocessing.scale_image, preprocessing.cast_image, preprocessing.image_to_cifar_shape):
        data = memory.Arrays(((np.arange(7 * 28 * 28) % 256).astype(np.uint8).reshape(7, 28, 28, 1),
                              np.arange(7, dtype=np.int64)))
        reference = list(memory.from_memory(data, Batching(3), step).as_numpy_iterator())
        got = ArrayBatches(data, Batching(3), step)
        assert len(got) == len(reference) == 3
        for (xr, yr), (xg, yg) in zip(reference, (got[i] for i in range(len(got))), strict=True):
            np.testing.assert_array_equal(xg, xr)
            np.testing.assert_array_equal(yg, yr)
            assert xg.dtype == xr.dtype and yg.dtype == yr.dtype


def test_each_epoch_is_a_new_seeded_permutation_and_a_stream_resumes_exactly():
    source = ArrayBatches(rows(), Batching(8, seed=3, drop_remainder=True), shuffle=True)
    stream = source.stream(0)
    epochs = [labels(source.stream(e * len(source)), len(source)) for e in range(3)]
    for e in epochs:
        assert len(set(e)) == len(e) == 48  # 6 whole batches of distinct rows, the remainder dropped
    assert not np.array_equal(epochs[0], epochs[1])
    np.testing.assert_array_equal(labels(ArrayBatches(rows(), Batching(8, seed=3, drop_remainder=True),
                                                      shuffle=True).stream(0), 6), epochs[0])  # seeded
    whole = np.concatenate([stream[i][1] for i in range(18)])
    np.testing.assert_array_equal(np.concatenate([source.stream(7)[i][1] for i in range(11)]), whole[7 * 8:])


def test_shards_split_each_global_batch_and_padding_weighs_zero():
    source = ArrayBatches(rows(21), Batching(8))
    halves = [source.shard(i, 2, pad_to=2) for i in range(2)]
    last = [h[2] for h in halves]  # the 5-row last batch, padded to 6: 3 rows each
    np.testing.assert_array_equal(np.concatenate([y for _, y, _ in last]), [16, 17, 18, 19, 20, 16])
    np.testing.assert_array_equal(np.concatenate([w for _, _, w in last]), [1, 1, 1, 1, 1, 0])
    for i in range(2):
        np.testing.assert_array_equal(np.concatenate([halves[0][i][1], halves[1][i][1]]), source[i][1])
    trimmed = source.shard(0, 1, trim_to=2)
    assert len(trimmed[2][1]) == 4


def test_resize_bilinear_is_tensorflows_kernel():
    rng = np.random.default_rng(0)
    for shape, size in (((9, 7, 3), (5, 6)), ((4, 5, 1), (13, 11)), ((28, 28, 1), (32, 17))):
        image = rng.integers(0, 256, shape).astype(np.float32)
        expected = tf.image.resize(image, size, method="bilinear").numpy()
        np.testing.assert_allclose(image_folder.resize_bilinear(image, size), expected, atol=2e-4)


def test_pillow_decoding_equals_tensorflows(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(1)
    for name, pixels in (("rgb.png", rng.integers(0, 256, (9, 7, 3), dtype=np.uint8)),
                         ("gray.png", rng.integers(0, 256, (6, 10), dtype=np.uint8))):
        Image.fromarray(pixels).save(tmp_path / name)
        for channels in (1, 3):
            if channels == 1 and pixels.ndim == 3:
                continue  # RGB -> gray: libpng's and Pillow's luma weights differ by design
            expected = image_folder.decode_image(tf.io.read_file(str(tmp_path / name)), (5, 6), channels,
                                                 raw=True).numpy()
            got = image_folder.decode_file(tmp_path / name, (5, 6), channels)
            np.testing.assert_allclose(got, expected, atol=2e-4)


def test_series_and_character_windows_have_one_numpy_and_one_tensorflow_form():
    series = zoo.data.from_series(np.sin(np.arange(200.0) / 7), window=12, horizon=3, seq2seq=True)
    text = zoo.data.from_text("the quick brown fox jumps over the lazy dog " * 20, seq_len=16, stride=5)
    for data in (series, text):
        examples, _ = data.examples("validation")
        reference = list(memory.from_memory(examples, Batching(8), data.preprocess).as_numpy_iterator())
        got = ArrayBatches(examples, Batching(8), data.preprocess)
        for (xr, yr), (xg, yg) in zip(reference, got, strict=True):
            np.testing.assert_allclose(xg, xr)
            np.testing.assert_allclose(yg, yr)


def test_mnist_arrays_file_holds_the_tfds_splits(fake_mnist_dir):  # noqa: F811
    arrays = mnist_local.read_arrays(fake_mnist_dir)
    for split in ("train", "test"):
        x, y = (np.concatenate(parts) for parts in zip(*zoo.data.load(
            "mnist", split, batch_size=64, data_dir=fake_mnist_dir, shuffle=False).as_numpy_iterator()))
        got = ArrayBatches(arrays[split], Batching(64), preprocessing.scale_image)
        xg, yg = (np.concatenate(parts) for parts in zip(*got))
        np.testing.assert_array_equal(xg, x)
        np.testing.assert_array_equal(yg, y)


def test_a_tensorflow_only_preprocess_is_refused_without_tensorflow():
    with pytest.raises(TypeError, match="need a zoo.data.batches.Preprocess"):
        ArrayBatches(rows(), Batching(4), preprocessing.generic_supervised)
    assert batches.steps_per_epoch(ArrayBatches(rows(), Batching(8))) == 7
