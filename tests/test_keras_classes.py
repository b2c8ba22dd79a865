"""After a bare `import zoo`, Keras loads any `.keras` file zoo wrote (zoo.keras_classes)."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np

import zoo

ROOT = Path(__file__).resolve().parent.parent


def _zoo_classes_keras_knows() -> dict[str, str]:
    """Keras's own registry, as the reference: every `zoo>` name it holds once each zoo module that calls
    `register_keras_serializable` is imported here (found by reading the source, not from
    `zoo._KERAS_CLASSES`), with the class it names."""
    from keras.src.saving import object_registration

    for path in (ROOT / "zoo").rglob("*.py"):
        if "register_keras_serializable" in path.read_text():
            parts = path.relative_to(ROOT).with_suffix("").parts
            importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    registry = dict(dict.items(object_registration.GLOBAL_CUSTOM_OBJECTS))  # as it holds them: no lookup hook
    return {name: f"{obj.__module__}.{obj.__qualname__}" for name, obj in registry.items()
            if name.startswith("zoo>") and obj.__module__.startswith("zoo.")}


def test_keras_loads_a_zoo_model_after_a_bare_import_zoo(tmp_path):
    """A fresh interpreter: `import zoo, keras; keras.saving.load_model(...)`, with zoo's layers, optimizer
    and loss in the file; then every zoo class Keras knows here is found there by name, so a module missing
    from `zoo._KERAS_CLASSES` fails, naming its classes."""
    known = _zoo_classes_keras_knows()
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
found = {{}}
for name in {sorted(known)!r}:
    obj = keras.saving.get_registered_object(name)
    found[name] = None if obj is None else f"{{obj.__module__}}.{{obj.__qualname__}}"
print(json.dumps({{"before": before, "model": type(model).__name__, "optimizer": type(model.optimizer).__name__,
                  "loss": type(model.loss).__name__, "layers": sorted({{type(l).__module__ for l in model.layers}}),
                  "found": found}}))
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
    lost = {name: cls for name, cls in known.items() if result["found"][name] != cls}
    assert not lost, f"after a bare `import zoo` Keras cannot find {lost}: add their modules to zoo._KERAS_CLASSES"
    assert len(known) > 20 and "zoo>ZooModel" in known  # the reference itself is not empty
