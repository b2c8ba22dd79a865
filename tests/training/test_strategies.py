"""Every strategy name, TF_CONFIG errors in bounded time, the Keras multi-worker fixes, 2 real local workers (one of
them killed mid-epoch, then resumed)."""

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import keras
import numpy as np
import pytest

from tests.training import workers
from zoo.training import distribute, multi_worker
from zoo.errors import ZooError

ROOT = Path(__file__).resolve().parents[2]


def _zoo(*args, cwd, env=None, timeout=300):
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT), **extra)
    return subprocess.run([sys.executable, "-m", "zoo.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize(
    "tf_config, message",
    [
        ("{not json", "not valid JSON"),
        ('{"task": {"type": "worker", "index": 0}}', "needs a 'cluster'"),
        ('{"cluster": {"worker": ["127.0.0.1:1"]}}', "needs a 'task'"),
        ('{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 3}}', "out of range"),
        ('{"cluster": {"worker": ["localhost"]}, "task": {"type": "worker", "index": 0}}', "is not 'host:port'"),
        ('{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "ps", "index": 0}}', "is not a job"),
    ],
)
def test_malformed_tf_config_is_a_clear_error(tf_config, message):
    with pytest.raises(ZooError, match=message):
        multi_worker.parse_tf_config(tf_config)


def test_unreachable_worker_fails_within_a_bounded_time(tmp_path, real_mnist_dir):
    me, absent = multi_worker.free_ports(2)
    tf_config = json.dumps({"cluster": {"worker": [f"127.0.0.1:{me}", f"127.0.0.1:{absent}"]},
                            "task": {"type": "worker", "index": 0}})
    start = time.monotonic()
    r = _zoo("train", "--model", "mlp", "--strategy", "multi_worker", "--data-dir", real_mnist_dir, cwd=tmp_path,
             env={"TF_CONFIG": tf_config, "ZOO_WORKER_TIMEOUT_S": "3"}, timeout=120)
    assert r.returncode != 0, r.stderr[-2000:]  # ended by the watchdog (SIGKILL: TF holds the GIL while waiting)
    assert f"127.0.0.1:{absent} did not join within 3 s" in r.stderr and "Traceback" not in r.stderr
    assert time.monotonic() - start < 90


def test_keras_fixes_are_detected_applied_once_and_skipped_once_fixed_upstream():
    from keras.src.backend.tensorflow import trainer

    multi_worker.apply_keras_fixes()
    assert getattr(trainer.TensorFlowTrainer._maybe_symbolic_build, "_zoo_fix", False) or not \
        multi_worker.symbolic_build_is_broken()
    assert multi_worker.apply_keras_fixes() == []  # idempotent

    # A Keras whose code no longer has the bugs is left alone.
    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        return "fixed upstream"

    def reduce_per_replica(values, strategy, reduction):
        return values

    fixed = types.SimpleNamespace(TensorFlowTrainer=type("T", (), {"_maybe_symbolic_build": _maybe_symbolic_build}),
                                  reduce_per_replica=reduce_per_replica)
    assert multi_worker.apply_keras_fixes(fixed) == []
    assert fixed.reduce_per_replica is reduce_per_replica


def test_keras_3_15_still_has_both_bugs():
    """If this fails, Keras changed the code the fixes target: check keras-team/keras#20585 and drop them."""
    from keras.src.backend.tensorflow import trainer

    if keras.__version__ != "3.15.1":
        pytest.skip(f"pinned check for Keras 3.15.1 (installed {keras.__version__})")
    build, reduce = trainer.TensorFlowTrainer._maybe_symbolic_build, trainer.reduce_per_replica
    stock = types.SimpleNamespace(  # the functions as Keras ships them, patched or not in this process
        TensorFlowTrainer=type("T", (), {"_maybe_symbolic_build": getattr(build, "__wrapped__", build)}),
        reduce_per_replica=getattr(reduce, "__wrapped__", reduce),
    )
    assert multi_worker.symbolic_build_is_broken(stock) and multi_worker.scalar_reduce_is_broken(stock)


def test_every_strategy_name():
    import tensorflow as tf

    assert distribute.strategy("auto").num_replicas_in_sync == 1
    assert isinstance(distribute.strategy("one_device"), tf.distribute.OneDeviceStrategy)
    assert distribute.strategy("mirrored").num_replicas_in_sync == 2
    with pytest.raises(ZooError, match="no TPU"):
        distribute.strategy("tpu")
    with pytest.raises(ZooError, match="does not train with ParameterServerStrategy"):
        distribute.strategy("parameter_server")
    assert distribute.is_chief(distribute.strategy("mirrored"))


TRAIN = ["--model", "mlp", "--set", "width=16", "--set", "depth=1", "--set", "dropout=0.0", "--dataset", "mnist",
         "--epochs", "2", "--batch-size", "16", "--train-split", "train[:512]", "--val-split", "none",
         "--test-split", "none", "--export-dir", "none", "--seed", "0", "--deterministic", "--backup-every", "2"]


def test_a_killed_worker_stops_the_other_and_the_same_command_resumes_to_one_devices_weights(tmp_path, real_mnist_dir):
    """Two local workers; worker 1 is SIGKILLed mid-epoch: the chief stops within 60 s naming it, and the same
    command resumes from the chief's last backup and ends where one device does (within float rounding)."""
    from zoo.cli import build_parser, train_config_from_args
    from zoo.training import train

    args = [*TRAIN, "--data-dir", real_mnist_dir, "--out", "multi"]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "KERAS_BACKEND")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    chief = tmp_path / "multi" / "mlp-mnist"
    took, output, killed_at = workers.kill_one_mid_epoch(args, env, tmp_path, chief / "backup" / "state.npz", 8)
    assert took < 60, output[-3000:]
    assert "worker 1" in output and "SIGKILL" in output  # the launcher names it ...
    assert "/job:worker/replica:0/task:1 stopped during training" in output  # ... and so does the chief
    assert 0 < killed_at["step_in_epoch"] < 32 and not (chief / "last.keras").exists()

    resumed = workers.rerun(args, env, tmp_path)
    assert f"resumed from:         epoch {killed_at['epoch'] + 1}, step {killed_at['step_in_epoch']}" in resumed
    assert (chief / "last.keras").is_file() and (chief / "history.csv").is_file()
    distributed = keras.saving.load_model(chief / "last.keras", safe_mode=True).get_weights()

    config = train_config_from_args(build_parser().parse_args(["train", *args, "--out", str(tmp_path / "single")]))
    single = train(config.replace(strategy="one_device", verbose=0)).model.get_weights()
    for a, b in zip(single, distributed):
        np.testing.assert_allclose(b, a, atol=1e-5)
