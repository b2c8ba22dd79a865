"""After a bare `import zoo`, Keras loads any `.keras` file zoo wrote (zoo.keras_classes)."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np

import zoo

ROOT = Path(__file__).resolve().parent.parent


def _registering_modules() -> set[str]:
    """The zoo modules that call `register_keras_serializable(package="zoo")`, read from the source."""
    found = set()
    for path in (ROOT / "zoo").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            package = [k.value for k in node.keywords if k.arg == "package"] + node.args[:1]
            if func == "register_keras_serializable" and any(getattr(p, "value", None) == "zoo" for p in package):
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_module_registering_keras_classes_is_listed():
    listed = set(zoo._KERAS_CLASSES)
    assert _registering_modules() == listed, "update zoo._KERAS_CLASSES (zoo/__init__.py)"


def test_keras_loads_a_zoo_model_after_a_bare_import_zoo(tmp_path):
    """A fresh interpreter: `import zoo, keras; keras.saving.load_model(...)`, with zoo's layers, optimizer
    and loss in the file (the lookup itself is generic: the test above keeps its module list complete)."""
    from zoo.core.fused_optimizers import FusedAdamW
    from zoo.training.losses import SparseCategoricalCrossentropy

    keras.utils.set_random_seed(0)
    model = zoo.build("resnet20", num_classes=3)  # ZooModel, zoo's BatchNormalization and Conv2D, ZeroPadShortcut
    model.compile(FusedAdamW(1e-3), SparseCategoricalCrossentropy())
    x = np.random.default_rng(0).random((2, 32, 32, 3), dtype=np.float32)
    model.save(tmp_path / "last.keras")
    np.savez(tmp_path / "outputs.npz", x=x, y=np.asarray(model(x, training=False)))
    # TensorFlow first, as in the conversion child: its import asks `importlib.util.find_spec("keras")`,
    # which must not use up the hook that the import of Keras runs.
    probe = f"""
import json, sys
import zoo, tensorflow, keras, numpy as np
before = sorted(m for m in sys.modules if m.startswith("zoo."))
model = keras.saving.load_model({str(tmp_path / "last.keras")!r})
data = np.load({str(tmp_path / "outputs.npz")!r})
np.testing.assert_allclose(np.asarray(model(data["x"], training=False)), data["y"], rtol=1e-6, atol=1e-6)
print(json.dumps({{"before": before, "model": type(model).__name__, "optimizer": type(model.optimizer).__name__,
                  "loss": type(model.loss).__name__, "layers": sorted({{type(l).__module__ for l in model.layers}})}}))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.splitlines()[-1])
    assert "zoo.core.model" not in result["before"]  # `import zoo` registered nothing by itself
    assert (result["model"], result["optimizer"], result["loss"]) == (
        "ZooModel", "FusedAdamW", "SparseCategoricalCrossentropy")
    assert {"zoo.architectures.batch_norm", "zoo.architectures.conv2d", "zoo.architectures.resnet"} <= set(
        result["layers"])
