"""`zoo benchmark MODEL_OR_RUN` (`zoo.benchmark`): every format on the model's own data as one table, an exported
artifact set measured as it is, and clear errors for bad input.

A tiny image classifier built by `zoo.training.own_data` from a tiny folder, trained for a second so that its
scores are confident (int8's argmax agreement then means something). The reference accuracy is computed here
from Pillow's pixels and Keras's `predict`, not by the code under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import zoo.benchmark  # noqa: E402
from zoo.deploy.artifacts import ArtifactError, ModelFileError  # noqa: E402
from zoo.errors import UnknownNameError  # noqa: E402


def _png(path, array):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(array, np.uint8)).save(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(run folder, the test images' independent accuracy): a run folder as `zoo train --data` leaves it."""
    from PIL import Image

    from zoo.training import own_data, planner

    root = tmp_path_factory.mktemp("images") / "shapes"
    rng = np.random.default_rng(0)
    for split, n in (("train", 6), ("test", 4)):
        for c, tint in (("blue", 2), ("green", 1), ("red", 0)):
            for i in range(n):
                a = rng.integers(0, 120, (8, 8, 3))
                a[..., tint] += 120
                _png(root / split / c / f"{i}.png", a)
    keras.utils.set_random_seed(0)
    config, data = planner.config_for_data(str(root), log=lambda line: None, model_overrides={"filters": [4, 8]})
    model = own_data.build_model(config, data)
    x, y = (np.asarray(a) for a in next(iter(data.splits.dataset("train", batch_size=18))))  # all 18
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    model.fit(np.tile(x, (40, 1, 1, 1)), np.tile(y, 40), batch_size=18, verbose=0)  # confident: int8 keeps its argmax
    folder = tmp_path_factory.mktemp("runs") / "shapes_run"
    folder.mkdir()
    model.save(folder / "last.keras")  # the model records the data it was built for (`zoo train --data` does)
    files = sorted((c, p) for c in ("blue", "green", "red") for p in (root / "test" / c).iterdir())
    x = np.stack([np.asarray(Image.open(p).convert("RGB"), np.float32) for _, p in files])
    scores = model.predict(x, verbose=0)  # the model takes 0-255 pixels (its own Rescaling)
    labels = np.array([("blue", "green", "red").index(c) for c, _ in files])
    return folder, float(np.mean(scores.argmax(-1) == labels))


@pytest.fixture(scope="module")
def measured(run):
    folder, _ = run
    return zoo.benchmark.benchmark(folder, formats="onnx", latency_runs=2)


def test_a_run_is_measured_in_every_precision_on_its_own_test_data(run, measured):
    folder, accuracy = run
    report = measured
    assert report.ok, report.table()
    assert [(r.format, r.precision) for r in report.rows] == [("keras", "float32"), ("onnx", "float32"),
                                                                ("onnx", "float16"), ("onnx", "int8")]
    assert report.examples == 12 and report.metric == "accuracy"
    assert report.row("keras").metric == pytest.approx(accuracy)  # the test split, read as in training
    assert report.row("onnx").metric == pytest.approx(accuracy)
    assert all(r.size_bytes > 0 and r.latency_ms > 0 for r in report.rows)
    written = {p.name for p in (folder / "benchmark").iterdir()}
    assert {"benchmark.json", "benchmark.md", "benchmark.csv", "report.json"} <= written
    text = report.table()
    assert "accuracy" in text and "onnx" in text and "int8" in text


def test_a_run_exports_to_int8_on_the_data_it_was_trained_on_with_no_data_flag(run, tmp_path, capsys):
    """`zoo export RUN --precision int8` needs no data flag: the run's model records the data it was trained on, and
    the plan calibrates and tests on it (`ExportData.from_run`), saying so. The accuracy the report gives is the
    independent one of the fixture (Pillow's pixels, Keras's predict)."""
    import json

    from zoo import cli

    folder, accuracy = run
    out = tmp_path / "exported"
    assert cli.main(["export", str(folder), "--formats", "onnx", "--precision", "int8", "--out", str(out),
                     "--latency-runs", "0"]) == 0
    printed = capsys.readouterr().out
    assert "test split (recorded with the model: the data it was trained on)" in printed, printed
    report = json.loads((out / "report.json").read_text())
    assert report["keras"]["accuracy"] == pytest.approx(accuracy)
    assert report["data"]["calibration"] and report["model"]["source"] == os.path.abspath(folder / "last.keras")


def test_an_exported_set_is_measured_as_it_is_and_a_damaged_artifact_keeps_its_row(run, measured, tmp_path):
    _, accuracy = run
    for r in measured.rows[1:]:
        shutil.copy(r.path, tmp_path)
    shutil.copy(os.path.join(measured.out_dir, "report.json"), tmp_path)
    damaged = tmp_path / os.path.basename(measured.row("onnx", "float16").path)
    damaged.write_bytes(damaged.read_bytes()[:200])
    report = zoo.benchmark.benchmark(tmp_path, latency_runs=2)
    assert [(r.format, r.precision) for r in report.rows] == [("onnx", "float32"), ("onnx", "float16"),
                                                                ("onnx", "int8")]
    bad = report.row("onnx", "float16")
    assert not bad.ok and str(damaged) in bad.error and bad.size_bytes == 200
    good = report.row("onnx", "float32")
    assert good.ok and good.metric == pytest.approx(accuracy) and good.latency_ms > 0
    assert report.row("onnx", "int8").ok and (tmp_path / "benchmark.md").is_file()
    # the command, in a fresh process: the runtimes, Pillow and NumPy, no TensorFlow and no Keras
    probe = (f"import sys, zoo.cli; rc = zoo.cli.main(['benchmark', {str(tmp_path)!r}, '--latency-runs', '2'])\n"
             "print(rc, sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'keras'}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()), cwd=os.getcwd()).stdout
    assert out.splitlines()[-1] == "1 []", out  # exit 1: the damaged artifact failed, the others were measured


def test_bad_input_is_a_clear_error(run, tmp_path, capsys):
    from zoo.cli import main

    folder, _ = run
    with pytest.raises(UnknownNameError, match="resnet50"):
        zoo.benchmark.benchmark("resnt50")
    with pytest.raises(ArtifactError, match=f"Did you mean: {folder}"):
        zoo.benchmark.benchmark(str(folder)[:-1])
    (tmp_path / "empty.keras").write_bytes(b"")
    with pytest.raises(ModelFileError, match="empty.keras"):
        zoo.benchmark.benchmark(tmp_path / "empty.keras")
    (tmp_path / "notes").mkdir()
    assert main(["benchmark", str(tmp_path / "notes")]) == 2
    assert "holds no model to benchmark" in capsys.readouterr().err
