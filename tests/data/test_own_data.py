"""Your own data at a path (zoo.data.from_path) and `zoo train --data`: what is inferred, the
preprocessing built into the model, and the message for every kind of bad input.

References are independent of the code under test: Pillow for pixels, pandas/numpy for
statistics and splits, plain Python for tokenization. Tiny data only; each test takes seconds.
"""

from __future__ import annotations

import os
import re
import string

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import zoo.data  # noqa: E402
from zoo.errors import DataError, UnknownNameError  # noqa: E402


def _png(path, array):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(array, np.uint8)).save(path)


@pytest.fixture
def image_folder(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "shapes"
    for c, value in (("circle", 40), ("square", 200)):
        for i in range(10):
            _png(root / c / f"{i}.png", np.clip(rng.normal(value, 20, (8, 6)), 0, 255))
    return root


def _table(n=120, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"size": rng.normal(50, 10, n), "rooms": rng.integers(1, 6, n),
                          "town": rng.choice(["north", "south"], n)})
    frame["label"] = np.where(frame["size"] > 50, "big", "small")
    return frame


# ---------------------------------------------------------------- inference


def test_image_folder_inference_and_raw_pixels_match_pillow(image_folder):
    from PIL import Image

    data = zoo.data.from_path(image_folder, validation_split=0.2, test_split=0.2, seed=3)
    assert (data.kind, data.task, data.class_names) == ("image", "classification", ("circle", "square"))
    found = {i.name: i for i in data.inferences}
    assert found["image size"].value == "8x6" and "all 20 images are 8x6" in found["image size"].reason
    assert found["color mode"].value == "grayscale"
    assert data.raw_input.core_shape == (8, 6, 1)
    # Stratified: each class gives 2 of its 10 images to validation and 2 to test.
    for split, n in (("train", 6), ("validation", 2), ("test", 2)):
        assert data.class_counts(split) == {"circle": n, "square": n}
    # Raw pixel values as stored (the model rescales), checked against Pillow.
    files = data.splits.files["test"]
    x, y = next(iter(data.splits.dataset("test", shuffle=False, batch_size=100)))
    expected = np.stack([np.asarray(Image.open(f), np.float32) for f in files])[..., None]
    np.testing.assert_allclose(x.numpy(), expected, atol=1e-4)
    np.testing.assert_array_equal(y.numpy(), [0 if "circle" in f else 1 for f in files])


def test_table_inference_stratified_split_and_statistics_from_train_rows(tmp_path):
    path = tmp_path / "houses.csv"
    frame = _table()
    frame.to_csv(path, index=False)
    data = zoo.data.from_path(path, validation_split=0.25, test_split=0.25, seed=1)
    found = {i.name: i for i in data.inferences}
    assert found["target"].value == "label" and found["target"].reason == "named like a target"
    assert found["task"].value == "classification" and found["categorical"].value == ["town"]
    counts = frame["label"].value_counts()
    for split in ("validation", "test"):
        got = data.class_counts(split)
        for c in ("big", "small"):
            assert abs(got[c] - counts[c] / 4) <= 1  # a quarter of each class
    # The centre and scale of the numeric columns over exactly the train rows, by pandas: the median and
    # interquartile range (robust scaling, the default).
    x, _ = next(iter(data.splits.dataset("train", shuffle=False, batch_size=1000)))
    x = x["numeric"].numpy()
    table = frame[["size", "rooms"]].to_numpy()
    rows = [int(np.flatnonzero(np.all(np.isclose(table, r, rtol=1e-6), axis=1))[0]) for r in x]
    assert len(set(rows)) == data.splits.num_examples["train"] == 60
    train_rows = frame.iloc[rows][["size", "rooms"]]
    assert data.raw_input.scaling == "robust"
    np.testing.assert_allclose(data.raw_input.mean, train_rows.median(), rtol=1e-5)
    np.testing.assert_allclose(data.raw_input.std, train_rows.quantile(0.75) - train_rows.quantile(0.25), rtol=1e-5)


def test_parquet_reads_like_the_same_csv(tmp_path):
    pytest.importorskip("pyarrow")
    frame = _table()
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    a, b = zoo.data.from_path(tmp_path / "t.csv"), zoo.data.from_path(tmp_path / "t.parquet")
    assert a.class_names == b.class_names and a.splits.num_examples == b.splits.num_examples
    np.testing.assert_allclose(a.raw_input.mean, b.raw_input.mean)
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match="bad.parquet cannot be read as Parquet"):
        zoo.data.from_path(tmp_path / "bad.parquet")


def test_regression_target_and_task_override(tmp_path):
    path = tmp_path / "prices.csv"
    _table().assign(price=lambda f: f["size"] * 1000.0).drop(columns="label").to_csv(path, index=False)
    data = zoo.data.from_path(path, target="price")
    assert data.task == "regression" and data.class_names is None and data.raw_input.target_scale[1] > 1000
    forced = zoo.data.from_path(path, target="rooms", task="regression")
    assert forced.task == "regression"
    as_classes = zoo.data.from_path(path, target="rooms")  # 5 integer values: classes
    assert as_classes.task == "classification" and as_classes.class_names == ("1", "2", "3", "4", "5")


def test_text_folder_and_series_inference(tmp_path):
    for c, words in (("pos", "good great fine"), ("neg", "bad awful poor")):
        for i in range(6):
            (tmp_path / "reviews" / c).mkdir(parents=True, exist_ok=True)
            (tmp_path / "reviews" / c / f"{i}.txt").write_text(f"The film was {words.split()[i % 3]}!")
    text = zoo.data.from_path(tmp_path / "reviews", validation_split=0.0, test_split=0.0)
    assert (text.kind, text.class_names) == ("text", ("neg", "pos"))
    # TextVectorization's standardization, independently: lower-case, strip punctuation, split.
    words = {w for t in text.splits.texts["train"]
             for w in t.lower().translate(str.maketrans("", "", string.punctuation)).split()}
    assert set(text.raw_input.vocabulary) == words

    days = pd.date_range("2021-01-01", periods=120, freq="D")
    pd.DataFrame({"day": days.strftime("%Y-%m-%d"), "sales": np.arange(120.0)}).to_csv(tmp_path / "s.csv", index=False)
    series = zoo.data.from_path(tmp_path / "s.csv", horizon=3)
    found = {i.name: i.value for i in series.inferences}
    assert series.kind == "series" and found["time column"] == "day" and found["window"] == 23  # (120-3)//5 cap
    x, y = next(iter(series.splits.dataset("train", shuffle=False, batch_size=1)))
    np.testing.assert_array_equal(x.numpy()[0, :, 0], np.arange(23.0))  # raw units, oldest first
    np.testing.assert_array_equal(y.numpy()[0], [23, 24, 25])


def test_classes_selects_and_orders_class_folders_and_filters_table_rows(image_folder, tmp_path):
    data = zoo.data.from_path(image_folder, classes=["square", "circle"], validation_split=0, test_split=0)
    assert data.class_names == ("square", "circle")
    files, labels = data.splits.files["train"], data.splits.labels["train"]
    assert all((label == 0) == ("square" in f) for f, label in zip(files, labels))
    with pytest.raises(DataError, match=r"has no class 'sqare'; did you mean: square\?"):
        zoo.data.from_path(image_folder, classes=["sqare", "circle"])
    frame = _table().assign(label=lambda f: np.where(f["rooms"] > 3, "many", np.where(f["rooms"] > 1, "some", "one")))
    frame.to_csv(tmp_path / "t.csv", index=False)
    kept = zoo.data.from_path(tmp_path / "t.csv", classes=["one", "many"], validation_split=0, test_split=0)
    assert kept.class_names == ("many", "one") and kept.splits.num_examples["train"] == int((frame.label != "some").sum())


# ---------------------------------------------------------------- bad input


def test_corrupt_image_is_skipped_and_listed_and_mixed_sizes_noted(image_folder):
    (image_folder / "circle" / "broken.png").write_bytes(b"not a png")
    _png(image_folder / "square" / "wide.png", np.zeros((8, 12)))
    data = zoo.data.from_path(image_folder)
    assert [os.path.basename(p) for p, _ in data.skipped] == ["broken.png"]
    assert "cannot identify image file" in data.skipped[0][1]
    assert any("2 sizes" in n and "resized to 8x6" in n for n in data.notes)
    assert sum(data.splits.num_examples.values()) == 21
    text = "\n".join(data.explain())
    assert "broken.png" in text and "skipped:" in text


@pytest.mark.parametrize("make, message", [
    (lambda root: root.mkdir(), "is empty"),
    (lambda root: _png(root / "only" / "a.png", np.zeros((4, 4))), "one class folder only"),
    (lambda root: (root / "a").mkdir(parents=True) or (root / "a" / "x.bin").write_bytes(b"1"),
     "hold no images"),
    (lambda root: _png(root / "a.png", np.zeros((4, 4))), "holds 1 file.*directly"),
])
def test_bad_folders(tmp_path, make, message):
    root = tmp_path / "data"
    make(root)
    with pytest.raises(DataError, match=message):
        zoo.data.from_path(root)


def test_bad_tables(tmp_path):
    path = tmp_path / "t.csv"
    _table().to_csv(path, index=False)
    with pytest.raises(DataError, match=r"no target column 'lable'\. Did you mean: label\?"):
        zoo.data.from_path(path, target="lable")
    with pytest.raises(DataError, match=r"no feature column 'siz'.*Did you mean: size"):
        zoo.data.from_path(path, features=["siz", "rooms"])
    (tmp_path / "book.txt").write_text("Call me Ishmael.")
    with pytest.raises(DataError, match="single text file.*one subfolder of text files per class"):
        zoo.data.from_path(tmp_path / "book.txt")
    (tmp_path / "header.csv").write_text("a,b,label\n")
    with pytest.raises(DataError, match="no data rows, only the header"):
        zoo.data.from_path(tmp_path / "header.csv")
    mixed = _table()
    mixed["rooms"] = mixed["rooms"].astype(object)
    mixed.loc[7, "rooms"] = "twelve"
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    with pytest.raises(DataError, match=r"mixed.csv: column 'rooms' mixes types: 119 numeric and 1 non-numeric"
                                        r".*'twelve' at row 7.*--categorical rooms"):
        zoo.data.from_path(tmp_path / "mixed.csv")
    mixed.loc[7, "rooms"] = None
    mixed.to_csv(tmp_path / "gap.csv", index=False)
    with pytest.raises(DataError, match=r"gap.csv: column 'rooms' has a missing .* at row 7 \(line 9 of the file\)"):
        zoo.data.from_path(tmp_path / "gap.csv")
    with pytest.raises(UnknownNameError, match="Did you mean: classification"):
        zoo.data.from_path(path, task="clasification")
    one = _table().assign(label="same")
    one.to_csv(tmp_path / "one.csv", index=False)
    with pytest.raises(DataError, match=r"target column 'label' has one value only \('same'\).*at least two classes"):
        zoo.data.from_path(tmp_path / "one.csv")


def test_unparsable_csv_lines_are_skipped_with_their_line_numbers(tmp_path):
    lines = ["a,b,label"] + [f"{i},{i * 2},{i % 2}" for i in range(20)]
    lines[5] = "4,8,0,extra"
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    data = zoo.data.from_path(tmp_path / "bad.csv")
    assert data.skipped == (("line 6", "4 fields, expected 3"),)
    assert sum(data.splits.num_examples.values()) == 19


def test_non_utf8_text_file_is_skipped_with_the_byte(tmp_path):
    for c in ("a", "b"):
        (tmp_path / "t" / c).mkdir(parents=True)
        for i in range(3):
            (tmp_path / "t" / c / f"{i}.txt").write_text(f"text {c} number {i}")
    (tmp_path / "t" / "a" / "latin.txt").write_bytes("café".encode("latin-1"))
    data = zoo.data.from_path(tmp_path / "t", validation_split=0, test_split=0)
    (where, why), = data.skipped
    assert where.endswith("latin.txt") and re.search(r"not valid utf-8: byte 3 \(b'\\xe9'\)", why)


def test_unsorted_series_and_missing_time_column(tmp_path):
    pd.DataFrame({"date": ["2020-01-02", "2020-01-01", "2020-01-03"] * 10, "v": range(30)}).to_csv(
        tmp_path / "s.csv", index=False)
    with pytest.raises(DataError, match="not strictly increasing at row 1"):
        zoo.data.from_path(tmp_path / "s.csv", horizon=1)
    pd.DataFrame({"v": range(30)}).to_csv(tmp_path / "n.csv", index=False)
    with pytest.raises(DataError, match="no time column"):
        zoo.data.from_path(tmp_path / "n.csv", horizon=1)


# ---------------------------------------------------------------- the model carries its preprocessing


def test_table_model_standardizes_inside_and_carries_metadata(tmp_path):
    import keras

    import zoo.deploy.formats
    from zoo.deploy.formats import metadata
    from zoo.training import own_data, planner

    path = tmp_path / "h.csv"
    _table().to_csv(path, index=False)
    config, data = planner.config_for_data(str(path), log=lambda line: None, model_overrides={"depth": 1})
    model = own_data.build_model(config, data)
    standardize = model.get_layer("standardize")
    x = np.array([[60.0, 2.0], [40.0, 5.0]], np.float32)
    expected = (x - np.array(data.raw_input.mean)) / np.array(data.raw_input.std)
    np.testing.assert_allclose(standardize(x).numpy(), expected, rtol=1e-5, atol=1e-6)
    onehot = model.get_layer("categories")(np.array([["north"], ["south"], ["west"]], dtype=object)).numpy()
    np.testing.assert_array_equal(onehot, [[0, 1, 0], [0, 0, 1], [1, 0, 0]])  # slot 0: unseen
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras", safe_mode=True)
    meta = metadata.of_model(loaded)
    assert meta.class_names == ("big", "small") and meta.input["kind"] == "table"
    assert zoo.deploy.formats.read_metadata(tmp_path / "m.keras") == meta  # read from the zip without loading
    import tensorflow as tf

    inputs = {"categorical": tf.constant([["north"]]), "numeric": tf.constant(x[:1])}
    np.testing.assert_allclose(loaded(inputs).numpy(), model(inputs).numpy(), atol=1e-6)


def test_series_model_outputs_in_the_series_units(tmp_path):
    from zoo.training import own_data, planner

    days = pd.date_range("2021-01-01", periods=200, freq="D")
    values = 1000 + 50 * np.sin(np.arange(200) / 5)
    pd.DataFrame({"date": days, "load": values}).to_csv(tmp_path / "load.csv", index=False)
    config, data = planner.config_for_data(str(tmp_path / "load.csv"), horizon=2, log=lambda line: None)
    model = own_data.build_model(config, data)
    core = model.get_layer("lstm_forecaster")
    window = values[:data.raw_input.window][None, :, None].astype(np.float32)
    mean, std = data.raw_input.mean[0], data.raw_input.std[0]
    expected = core.predict((window - mean) / std, verbose=0) * std + mean
    np.testing.assert_allclose(model.predict(window, verbose=0), expected, rtol=1e-5)
    train = values[: data.splits.bounds["train"][1]]
    assert mean == pytest.approx(train.mean()) and std == pytest.approx(train.std())


def test_recipe_data_path_is_relative_to_the_recipe(tmp_path, image_folder):
    from zoo.training.config import load_recipe

    (tmp_path / "recipes").mkdir()
    recipe = tmp_path / "recipes" / "mine.toml"
    recipe.write_text('model = "lenet5"\nepochs = 1\ndata = "../shapes"\n')
    assert load_recipe(str(recipe)).data == str(image_folder)


def test_cli_infers_prints_and_lets_flags_win(tmp_path, image_folder, capsys):
    from zoo.cli import build_parser, train_config_from_args

    args = build_parser().parse_args(["train", "--data", str(image_folder), "--model", "lenet5",
                                      "--image-size", "16x12", "--out", str(tmp_path / "runs")])
    lines = []
    config, data = train_config_from_args(args, log=lines.append)
    text = "\n".join(lines)
    assert "recipe:       own_data/images (images of at most 64 px)  [--recipe]" in text
    assert "model:" not in text  # given, not inferred
    assert re.search(r"epochs:\s+60 \(about 150,000 example visits over 16 training examples\)", text)
    assert config.model == "lenet5" and config.model_overrides == {} and data.raw_input.image_size == (16, 12)
    assert config.run_dir == tmp_path / "runs" / "lenet5-shapes"
    with pytest.raises(ValueError, match="either --data PATH .* or --dataset"):
        train_config_from_args(build_parser().parse_args(["train", "--data", str(image_folder), "--dataset", "mnist"]))
    with pytest.raises(ValueError, match="apply to your own data only"):
        from zoo.training.config import TrainConfig

        TrainConfig(horizon=3).validate()


# ---------------------------------------------------------------- zoo data info


def test_data_info_lists_classes_sizes_values_and_skipped_files(image_folder, capsys):
    from zoo.cli import main

    (image_folder / "circle" / "broken.png").write_bytes(b"not a png")
    (image_folder / "square" / "truncated.png").write_bytes((image_folder / "square" / "0.png").read_bytes()[:60])
    info = zoo.data.describe_path(image_folder)
    assert info.facts["counts"] == {"train": {"circle": 10, "square": 10}}
    assert info.facts["sizes"] == [{"height": 8, "width": 6, "images": 20}]
    assert sorted(os.path.basename(p) for p, _ in info.skipped) == ["broken.png", "truncated.png"]
    # The pixel range, independently: every readable image's min and max by Pillow (all are sampled).
    from PIL import Image

    arrays = [np.asarray(Image.open(image_folder / c / f"{i}.png")) for c in ("circle", "square") for i in range(10)]
    assert info.facts["pixel_range"] == [min(a.min() for a in arrays), max(a.max() for a in arrays)]
    assert main(["data", "info", str(image_folder)]) == 0
    out = capsys.readouterr().out
    assert "circle  train 10" in out and "broken.png: cannot identify image file" in out
    assert "zoo train --data would use:" in out and "color mode:   grayscale" in out


def test_data_info_on_a_table_and_on_bad_input(tmp_path, capsys):
    from zoo.cli import main

    frame = _table(20)
    frame.loc[3, "size"] = None
    frame.to_csv(tmp_path / "t.csv", index=False)
    info = zoo.data.describe_path(tmp_path / "t.csv")
    assert info.facts["columns"]["size"]["missing"] == 1 and info.facts["columns"]["rooms"]["type"] == "integer"
    assert info.facts["columns"]["rooms"]["min"] == frame["rooms"].min()
    assert "column 'size' has a missing" in info.problem  # training would refuse it, and says why
    (tmp_path / "h.csv").write_text("a,b\n")
    assert main(["data", "info", str(tmp_path / "h.csv")]) == 1
    assert "no data rows, only the header" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["data", "info", str(tmp_path / "empty")]) == 1
    assert "is empty" in capsys.readouterr().out
