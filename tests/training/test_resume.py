"""Resume after SIGKILL mid-epoch, and bitwise determinism with --seed --deterministic."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
STEPS_PER_EPOCH = 4096 // 32


def _cmd(data_dir):
    return [sys.executable, "-m", "zoo.cli", "train", "--model", "lenet5", "--dataset", "mnist", "--epochs", "2",
            "--batch-size", "32", "--optimizer", "sgd", "--lr", "0.05", "--train-split", "train[:4096]",
            "--val-split", "none", "--test-split", "none", "--export-dir", "none", "--out", "runs", "--seed", "3",
            "--deterministic", "--backup-every", "4", "--data-dir", data_dir]


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))


def _run(cwd, data_dir):
    r = subprocess.run(_cmd(data_dir), cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _final(cwd):
    model = keras.saving.load_model(Path(cwd) / "runs" / "lenet5-mnist" / "last.keras", safe_mode=True)
    return model.get_weights(), [v.numpy() for v in model.optimizer.variables]


def _state(path):
    with np.load(path) as data:
        return json.loads(str(data["meta"]))


def test_a_seeded_deterministic_run_killed_mid_epoch_resumes_bitwise_to_an_uninterrupted_one(tmp_path, real_mnist_dir):
    """Two runs of the same seeded command: one uninterrupted, one SIGKILLed mid-epoch and started again. Equal
    bitwise at the end, optimizer slots included: determinism and an exact resume at once (any nondeterministic
    op or a batch seen twice or skipped would part them)."""
    a, c = tmp_path / "a", tmp_path / "c"
    for d in (a, c):
        d.mkdir()
    _run(a, real_mnist_dir)
    weights_a, slots_a = _final(a)

    # Kill the second run with SIGKILL in the middle of an epoch, once a backup exists.
    state = c / "runs" / "lenet5-mnist" / "backup" / "state.npz"
    proc = subprocess.Popen(_cmd(real_mnist_dir), cwd=c, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if state.is_file() and _state(state)["global_step"] >= 40:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    killed_at = _state(state)
    assert proc.returncode == -signal.SIGKILL and killed_at["step_in_epoch"] > 0  # mid-epoch
    assert not (c / "runs" / "lenet5-mnist" / "last.keras").exists()

    resumed = _run(c, real_mnist_dir)  # the same command again
    assert f"resumed from:         epoch {killed_at['epoch'] + 1}, step {killed_at['step_in_epoch']}" in resumed.stdout
    weights_c, slots_c = _final(c)
    # Optimizer slots and iteration count (hence the LR schedule) continued: all equal bitwise.
    assert int(slots_c[0]) == 2 * STEPS_PER_EPOCH
    assert all(np.array_equal(x, y) for x, y in zip(weights_a + slots_a, weights_c + slots_c))
    with open(c / "runs" / "lenet5-mnist" / "history.csv") as f:
        assert [line.split(",")[0] for line in f.read().splitlines()[1:]] == ["0", "1"]
    assert not (c / "runs" / "lenet5-mnist" / "backup").exists()  # finished: nothing left to resume
