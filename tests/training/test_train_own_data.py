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
