"""`zoo train --data PATH` end to end on tiny data: the printed inferences, the run directory, the
export carrying the metadata, and an imbalanced folder reported as such. One epoch each."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture
def digits(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for c, n in (("zero", 18), ("one", 6)):  # 3:1, reported as imbalance
        for i in range(n):
            a = rng.integers(0, 60, (12, 12), dtype=np.uint8)
            a[:, 5:7] = 250 if c == "one" else a[:, 5:7]
            (tmp_path / "digits" / c).mkdir(parents=True, exist_ok=True)
            Image.fromarray(a).save(tmp_path / "digits" / c / f"{i}.png")
    return tmp_path / "digits"


def test_zoo_train_data_prints_inferences_and_exports_with_metadata(digits, tmp_path, capsys):
    import keras

    from zoo.cli import main

    code = main(["train", "--data", str(digits), "--epochs", "1", "--out", str(tmp_path / "runs"),
                 "--export-dir", str(tmp_path / "sm"), "--verbose", "0", "--val-fraction", "0.25",
                 "--test-fraction", "0.25"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "image size:   12x12 (all 24 images are 12x12)" in out
    assert "color mode:   grayscale (every image is single-channel)" in out
    # 6 and 18 images, a quarter of each held out twice (rounded): 2 and 10 left to train on.
    assert re.search(r"one 2, zero 10; imbalanced: 'zero' has 5\.0x the examples of 'one'", out)
    assert "recipe:       own_data/images (images of at most 64 px)  [--recipe]" in out
    assert "splits:       train 12, validation 6, test 6" in out
    run_dir = tmp_path / "runs" / "convnet_bn-digits"
    model = keras.saving.load_model(run_dir / "last.keras", safe_mode=True)
    assert model.input_shape == (None, 12, 12, 1) and model.get_layer("rescale") is not None
    saved = json.loads((tmp_path / "sm" / "convnet_bn" / "1" / "assets.extra" / "zoo_metadata.json").read_text())
    assert saved["class_names"] == ["one", "zero"] and saved["input"]["image_size"] == [12, 12]
    assert saved["source"]["reading"]["seed"] == 0 and saved["source"]["reading"]["test_split"] == 0.25
    accuracy = float(re.search(r"test accuracy:\s+([0-9.]+)", out).group(1))
    import zoo

    # `zoo val` re-reads the same 6 test images (same seed and fractions) and measures the same accuracy.
    report = zoo.val(run_dir, str(digits))
    assert report.examples == 6 and report.metrics["accuracy"] == pytest.approx(accuracy, abs=1e-4)


def test_bad_data_flags_fail_before_any_work(digits, tmp_path, capsys):
    from zoo.cli import main

    assert main(["train", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "runs")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["train", "--horizon", "3", "--out", str(tmp_path / "runs")]) == 2
    assert "apply to your own data only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--data", str(digits), "--image-size", "12xx"])
    assert "--image-size" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def _noise_table(path, rows=240):
    rng = np.random.default_rng(0)
    import pandas as pd

    frame = pd.DataFrame({"a": rng.normal(size=rows), "b": rng.lognormal(size=rows), "c": rng.integers(0, 5, rows),
                          "town": rng.choice(["n", "s"], rows)})
    frame["y"] = rng.integers(0, 2, rows)  # noise: validation loss is best early, so early stopping ends the run
    frame.to_csv(path, index=False)
    return path


def test_table_recipe_is_inferred_from_the_table_and_printed_with_its_flags(tmp_path):
    from zoo.training.planner import config_for_data

    lines = []
    config, data = config_for_data(str(_noise_table(tmp_path / "t.csv", rows=1000)), target_column="y",
                                   log=lines.append)
    text = "\n".join(lines)
    assert data.splits.num_examples["train"] == 800
    # 800 rows / 32 steps = 25 -> the nearest power of 2 is 32; 2,000,000 visits / 800 rows -> capped at 300.
    assert (config.model, config.batch_size, config.epochs) == ("tabular_mlp", 32, 300)
    assert (config.early_stopping, config.time_limit, config.recipe) == (16, 100, "own_data/table")
    for line in ("recipe:       own_data/table (table data)  [--recipe]", "batch size:   32 (", "[--batch-size]",
                 "epochs:       300 (at most", "scaling:      robust (", "[--scaling]",
                 "model numeric_features:3 (", "model:        tabular_mlp (",
                 "model members:8 (a TabM-mini ensemble: 800 train rows, at most 5,000)"):
        assert line in text, text
    assert data.raw_input.clip == 3.0 and data.raw_input.numeric == ("a", "b", "c")
    # A value the user gives is kept, and printed as no inference.
    lines.clear()
    config, _ = config_for_data(str(tmp_path / "t.csv"), target_column="y", batch_size=64, scaling="standard",
                                log=lines.append)
    assert config.batch_size == 64 and not any(line.startswith("batch size:") for line in lines)
    assert any(line.startswith("scaling:      standard (given)") for line in lines)


def test_zoo_train_table_stops_early_and_reports_the_epoch_it_kept(tmp_path, capsys):
    import csv

    from zoo.cli import main

    path = _noise_table(tmp_path / "noise.csv")
    code = main(["train", "--data", str(path), "--target", "y", "--early-stopping", "3", "--out", str(tmp_path / "runs"),
                 "--export-dir", "none", "--verbose", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "recipe:       own_data/table (table data)" in out and "model:        tabular_mlp" in out
    found = re.search(r"epochs:\s+(\d+) run, kept epoch (\d+) \(best val_loss ([0-9.]+)\); stopped by early stopping",
                      out)
    assert found, out
    run, kept, best = int(found.group(1)), int(found.group(2)), float(found.group(3))
    assert kept < run < 300
    run_dir = tmp_path / "runs" / "tabular_mlp-noise"
    with open(run_dir / "history.csv") as f:
        losses = [float(row["val_loss"]) for row in csv.DictReader(f)]
    assert len(losses) == run and min(losses) == pytest.approx(best, abs=1e-4)
    assert losses.index(min(losses)) + 1 == kept
    assert (run_dir / "best.keras").is_file()  # written once, with the kept epoch's weights


def test_a_recipe_file_beside_data_is_the_recipe_and_its_knobs_apply(digits, tmp_path):
    """`zoo train --data X --recipe file.toml`: --recipe is a knob as well as the recipe to load, given once."""
    from zoo.cli import build_parser
    from zoo.cli.train import train_config_from_args

    recipe = tmp_path / "mine.toml"
    recipe.write_text('model = "mlp"\nepochs = 3\n')
    args = build_parser().parse_args(["train", "--data", str(digits), "--recipe", str(recipe)])
    config, data = train_config_from_args(args, log=lambda line: None)
    assert (config.model, config.epochs, data.kind) == ("mlp", 3, "image")
