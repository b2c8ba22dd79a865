"""scripts/train.py end to end on a small slice of real MNIST, and its bad-input errors."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from zoo.deploy.formats.saved_model import SERVING_SIGNATURE

ROOT = Path(__file__).resolve().parents[2]


def run_train(*args, cwd):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )


def test_train_script_end_to_end(tmp_path, real_mnist_dir):
    r = run_train(
        "--model", "lenet5", "--dataset", "mnist", "--epochs", "2", "--batch-size", "64", "--lr", "3e-3",
        "--train-split", "train[:2048]", "--val-split", "test[:512]", "--test-split", "test[:1000]",
        "--out", "runs", "--export-dir", "saved_models", "--seed", "1", "--data-dir", real_mnist_dir,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line and not line.startswith(" "))
    export = tmp_path / lines["export path"].strip()
    accuracy = float(lines["test accuracy"].split()[0])
    assert accuracy > 0.8  # 2k examples, 2 epochs: well above chance
    assert float(lines["training wall time"].split()[0]) > 0
    assert export == tmp_path / "saved_models" / "lenet5" / "1"

    run_dir = tmp_path / "runs" / "lenet5-mnist"
    with open(run_dir / "history.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1] and "val_accuracy" in rows[0]
    assert (run_dir / "best.keras").is_file() and any((run_dir / "logs").rglob("*tfevents*"))
    assert not (run_dir / "backup").exists()  # BackupAndRestore cleans up after a finished run

    # The export is the trained model: its accuracy on the same slice matches the script's.
    import zoo.data

    sig = tf.saved_model.load(str(export)).signatures[SERVING_SIGNATURE]
    correct = total = 0
    for x, y in zoo.data.load("mnist", "test[:1000]", 500, data_dir=real_mnist_dir):
        correct += int((np.argmax(sig(image=x)["predictions"], axis=1) == y.numpy()).sum())
        total += len(y)
    assert correct / total == pytest.approx(accuracy, abs=1e-3)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "lenet"], "Did you mean: lenet5"),
        (["--dataset", "mnsit"], "Did you mean: mnist"),
        (["--strategy", "mirorred"], "Did you mean: mirrored"),
        (["--train-split", "validation"], "Available splits"),
        (["--epochs", "0"], "positive integer"),
        (["--batch-size", "-3"], "positive integer"),
        (["--out", "blocker"], "is a file"),
    ],
)
def test_bad_input_gets_a_clear_error_and_writes_nothing(tmp_path, args, message, real_mnist_dir, monkeypatch, capsys):
    """In process (the same `main` scripts/train.py calls): every check runs before anything is written."""
    from zoo.cli import main

    (tmp_path / "blocker").write_text("a file")
    monkeypatch.chdir(tmp_path)
    try:
        rc = main(["train", *args, "--export-dir", "saved_models", "--data-dir", real_mnist_dir])
    except SystemExit as e:  # argparse's usage errors
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["blocker"]  # no runs/, no saved_models/
