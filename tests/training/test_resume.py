"""Resume after SIGKILL mid-epoch, and bitwise determinism with --seed --deterministic, augmentation and Dropout
included."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
STEPS_PER_EPOCH = 512 // 32
KILL_AT = STEPS_PER_EPOCH + 4  # the step after which the killed run dies: epoch 2, two steps past its last backup

# The killed run: the same `zoo train`, with one change, that it SIGKILLs itself once step KILL_AT is trained. A
# step counted in the process is exact where a parent polling the backup file would race a run this short.
KILLED = f"""
import os, runpy, signal, sys
from zoo.training.callbacks import ResumableBackup
end = ResumableBackup.on_train_batch_end
def on_train_batch_end(self, batch, logs=None):
    end(self, batch, logs)
    if self.global_step >= {KILL_AT}:
        os.kill(os.getpid(), signal.SIGKILL)
ResumableBackup.on_train_batch_end = on_train_batch_end
runpy.run_module("zoo.cli", run_name="__main__", alter_sys=True)
"""


def _args(data_dir):
    # mlp keeps its Dropout (a seed generator in the model); --augment adds random layers in the input pipeline.
    return ["train", "--model", "mlp", "--set", "width=64", "--dataset", "mnist", "--epochs", "2", "--batch-size", "32",
            "--optimizer", "sgd", "--lr", "0.05", "--train-split", "train[:512]", "--val-split", "none",
            "--test-split", "none", "--export-dir", "none", "--out", "runs", "--seed", "3", "--deterministic",
            "--augment", "flip,translate:0.1,rotate:0.05", "--backup-every", "3", "--data-dir", data_dir]


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))


def _start(cwd, data_dir, killed=False):
    head = [sys.executable, "-c", KILLED] if killed else [sys.executable, "-m", "zoo.cli"]
    return subprocess.Popen([*head, *_args(data_dir)], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return out


def _final(cwd):
    model = keras.saving.load_model(Path(cwd) / "runs" / "mlp-mnist" / "last.keras", safe_mode=True)
    return model.get_weights(), [v.numpy() for v in model.optimizer.variables]


def _state(path):
    with np.load(path) as data:
        return json.loads(str(data["meta"]))


def test_a_seeded_deterministic_augmented_run_killed_mid_epoch_resumes_bitwise_to_an_uninterrupted_one(
        tmp_path, real_mnist_dir):
    """Two runs of the same seeded command: one uninterrupted, one SIGKILLed mid-epoch and started again. Equal
    bitwise at the end, optimizer slots included: determinism and an exact resume at once (any nondeterministic
    op, a batch seen twice or skipped, a Dropout mask or an augmentation drawn from a generator state the backup
    did not hold would part them)."""
    a, c = tmp_path / "a", tmp_path / "c"
    for d in (a, c):
        d.mkdir()
    killed, uninterrupted = _start(c, real_mnist_dir, killed=True), _start(a, real_mnist_dir)
    killed.communicate(timeout=300)
    _finish(uninterrupted)
    weights_a, slots_a = _final(a)

    run = c / "runs" / "mlp-mnist"
    killed_at = _state(run / "backup" / "state.npz")
    assert killed.returncode == -signal.SIGKILL
    assert (killed_at["epoch"], killed_at["step_in_epoch"]) == (1, 2)  # mid-epoch; steps 19 and 20 are lost
    assert not (run / "last.keras").exists()

    resumed = _finish(_start(c, real_mnist_dir))  # the same command again
    assert "resumed from:         epoch 2, step 2" in resumed
    weights_c, slots_c = _final(c)
    # Optimizer slots and iteration count (hence the LR schedule) continued: all equal bitwise.
    assert int(slots_c[0]) == 2 * STEPS_PER_EPOCH
    assert len(weights_a + slots_a) == len(weights_c + slots_c)
    assert all(np.array_equal(x, y) for x, y in zip(weights_a + slots_a, weights_c + slots_c))
    with open(run / "history.csv") as f:
        assert [line.split(",")[0] for line in f.read().splitlines()[1:]] == ["0", "1"]
    assert not (run / "backup").exists()  # finished: nothing left to resume


def test_the_backup_holds_the_random_layers_and_keras_global_seed_states(tmp_path):
    """Cheap, in-process: a model restored from the backup draws the Dropout masks the backed-up model draws next,
    so one more step gives both the same weights; and `keras.random` with no seed draws, after the restore, what it
    drew after the save."""
    import zoo
    from zoo.training.callbacks import ResumableBackup

    x = np.random.default_rng(0).random((16, 28, 28, 1), np.float32)
    y = np.arange(16) % 10

    def model():
        m = zoo.build("mlp", width=16, depth=1, dropout=0.5)
        m.compile(keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
        return m

    first = model()
    first.train_on_batch(x, y)
    backup = ResumableBackup(tmp_path, steps_per_epoch=4)
    backup.set_model(first)
    keras.random.uniform((1,))  # something draws from the global generator
    backup.save()
    after_save = keras.ops.convert_to_numpy(keras.random.uniform((3,)))

    second = model()  # its own weights and seed states, till the restore
    assert backup.restore(second) is not None
    assert np.array_equal(keras.ops.convert_to_numpy(keras.random.uniform((3,))), after_save)
    first.train_on_batch(x, y)
    second.train_on_batch(x, y)
    assert all(np.array_equal(a, b) for a, b in zip(first.get_weights(), second.get_weights()))
