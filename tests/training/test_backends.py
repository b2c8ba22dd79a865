"""`zoo train` on JAX and PyTorch: the backend knob, no TensorFlow needed, JAX `data_parallel` on 2 devices
against one device, 2 JAX processes, and a worker killed mid-epoch (then resumed to the same weights).

Keras reads its backend once per process, and this test process runs TensorFlow (tests/conftest.py), so
each other backend runs in a subprocess; each subprocess does several checks to keep the start-ups few.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.training import workers
from zoo.training import backends, multi_worker

ROOT = Path(__file__).resolve().parents[2]
NO_TENSORFLOW = Path(__file__).parent / "no_tensorflow"  # a sitecustomize that makes `import tensorflow` fail

# A small MLP on a slice of MNIST: a few seconds of training on any backend.
TINY = ["--model", "mlp", "--set", "width=16", "--set", "depth=1", "--set", "dropout=0.0", "--dataset", "mnist",
        "--batch-size", "64", "--optimizer", "sgd", "--lr", "0.05", "--seed", "0", "--verbose", "0"]


def _env(backend, *paths, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "KERAS_BACKEND", *multi_worker.JAX_ENV)}
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(PYTHONPATH=os.pathsep.join([*map(str, paths), str(ROOT), *inherited]), TF_CPP_MIN_LOG_LEVEL="2",
               KERAS_BACKEND=backend, **extra)
    return env


def _python(code, env, cwd, timeout=600):
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-4000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_process_that_imported_keras_with_another_backend_is_told_so():
    import keras  # noqa: F401  (this process runs TensorFlow)

    assert backends.use("tensorflow") == "tensorflow"
    with pytest.raises(backends.BackendError, match="imported Keras with backend 'tensorflow' already"):
        backends.use("jax")
    with pytest.raises(Exception, match="Did you mean: torch"):
        backends.check_name("trch")
    assert backends.check_name("pytorch") == "torch"


# What the process without TensorFlow runs: `zoo train` on MNIST (its arrays file), on an image folder decoded
# by Pillow and on a table, then checks TensorFlow never loaded.
_WITHOUT_TENSORFLOW = r"""
import json, sys
import numpy as np
import zoo
from zoo.cli import main

model = zoo.build("lenet5", num_classes=10)
assert model(np.zeros((2, 28, 28, 1), "float32")).shape == (2, 10)
tiny = sys.argv[2:]
out = {}
assert main(["train", "--backend", sys.argv[1], *tiny, "--epochs", "1", "--train-split", "train[:1024]",
             "--val-split", "test[:256]", "--test-split", "test[:512]", "--out", "mnist"]) == 0
out["mnist"] = json.load(open("mnist/mlp-mnist/run.json"))["backend"]["backend"]
for data in ("shapes", "table.csv"):
    assert main(["train", "--backend", sys.argv[1], "--data", data, "--model", "mlp", "--epochs", "2",
                 "--export-dir", "none", "--batch-size", "16", "--seed", "0", "--verbose", "0", "--out", "own"]) == 0
out["tensorflow_loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tensorflow_datasets"))
print(json.dumps(out))
"""


def _own_data(folder: Path) -> None:
    """An image folder (two classes of 8x8 PNGs, a bright and a dark square) and a table (two classes)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for label, level in (("bright", 200), ("dark", 40)):
        (folder / "shapes" / label).mkdir(parents=True)
        for i in range(12):
            pixels = np.clip(level + rng.normal(0, 20, (8, 8, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / "shapes" / label / f"{i}.png")
    x = rng.normal(size=(120, 3))
    rows = ["a,b,c,label"] + [f"{a:.4f},{b:.4f},{c:.4f},{int(a + b > 0)}" for a, b, c in x]
    (folder / "table.csv").write_text("\n".join(rows) + "\n")


# PyTorch by default, JAX with `-m slow` too: the same data path without TensorFlow, and JAX's start (its import,
# its compilations) costs twice PyTorch's (suite time, issue 39: 36 s against 19 s in the 2-core suite).
@pytest.mark.parametrize("backend", [pytest.param("jax", marks=pytest.mark.slow), "torch"])
def test_zoo_trains_on_a_backend_without_tensorflow(backend, tmp_path, real_mnist_dir):
    _own_data(tmp_path)
    env = _env(backend, NO_TENSORFLOW, ZOO_DATA_DIR=real_mnist_dir)
    out = _python(_WITHOUT_TENSORFLOW.replace("sys.argv[1]", repr(backend)).replace("sys.argv[2:]", repr(TINY)),
                  env, tmp_path)
    assert out == {"mnist": backend, "tensorflow_loaded": []}
    for run in ("mlp-shapes", "mlp-table"):
        assert len((tmp_path / "own" / run / "history.csv").read_text().splitlines()) == 3  # a header, 2 epochs


# One JAX process with 2 CPU devices: the same run on one device and with data_parallel over both, then the
# one-device run kept as the reference of the multi-process tests below.
_DATA_PARALLEL = r"""
import json, sys
from zoo.training import backends
backends.use("jax")
from zoo.cli import build_parser, train_config_from_args
from zoo.training import train
import jax
assert len(jax.devices()) == 2, jax.devices()
out = {}
for strategy in ("one_device", "data_parallel"):
    args = build_parser().parse_args(["train", *sys.argv[1:], "--strategy", strategy, "--out", strategy])
    result = train(train_config_from_args(args))
    out[strategy] = {"loss": result.history["loss"], "test": result.test_metrics,
                     "weights": [w.tolist() for w in result.model.get_weights()]}
print(json.dumps(out))
"""

MULTI = [*TINY, "--epochs", "2", "--batch-size", "16", "--train-split", "train[:512]", "--val-split", "none",
         "--test-split", "test[:999]", "--export-dir", "none", "--deterministic", "--backup-every", "2"]


@pytest.fixture(scope="module")
def jax_reference(tmp_path_factory, real_mnist_dir):
    cwd = tmp_path_factory.mktemp("jax_data_parallel")
    env = _env("jax", XLA_FLAGS="--xla_force_host_platform_device_count=2", ZOO_DATA_DIR=real_mnist_dir)
    code = _DATA_PARALLEL.replace("sys.argv[1:]", repr(MULTI))
    return _python(code, env, cwd)


def test_data_parallel_on_two_jax_devices_trains_like_one_device(jax_reference):
    one, both = jax_reference["one_device"], jax_reference["data_parallel"]
    np.testing.assert_allclose(both["loss"], one["loss"], rtol=1e-4)
    # test[:999]: the last batch (39 rows) is padded to split over 2 devices; the metrics count real rows only
    assert abs(both["test"]["accuracy"] - one["test"]["accuracy"]) < 1e-6
    for a, b in zip(one["weights"], both["weights"]):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-5)


# With `-m slow`: the default run kills a worker of two on TensorFlow (`tests/training/test_strategies.py`, the same
# launcher and watchdog, `zoo.training.multi_worker`), and checks JAX's data parallelism on two devices above
# (suite time, issue 39: this test took 74 s of the 2-core suite).
@pytest.mark.slow
def test_two_jax_processes_train_like_one_device_and_a_killed_worker_stops_them_then_resumes(
        jax_reference, tmp_path, real_mnist_dir):
    import keras

    import zoo.core.model  # noqa: F401  (registers ZooModel, which last.keras holds)

    env = _env("jax", ZOO_DATA_DIR=real_mnist_dir)
    args = ["--backend", "jax", *MULTI, "--out", "runs"]
    run = tmp_path / "runs" / "mlp-mnist"
    took, output, killed_at = workers.kill_one_mid_epoch(args, env, tmp_path, run / "backup" / "state.npz", 8)
    assert took < 60, output[-3000:]
    assert "worker 1" in output and "SIGKILL" in output  # the launcher names it ...
    assert "heartbeat" in output or "unhealthy" in output or "stopped" in output  # ... and so does the chief
    assert 0 < killed_at["step_in_epoch"] < 32 and not (run / "last.keras").exists()

    print(f"killed worker 1 at {killed_at}: every process stopped {took:.1f} s later")
    resumed = workers.rerun(args, env, tmp_path)  # the same command again
    assert f"resumed from:         epoch {killed_at['epoch'] + 1}, step {killed_at['step_in_epoch']}" in resumed
    weights = keras.saving.load_model(run / "last.keras", compile=False).get_weights()
    for a, b in zip(jax_reference["one_device"]["weights"], weights, strict=True):
        np.testing.assert_allclose(b, np.asarray(a), atol=1e-5)
    assert json.loads((run / "run.json").read_text())["strategy"]["processes"] == 2
