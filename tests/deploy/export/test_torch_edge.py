"""The torch route's on-device formats in a process where `import tensorflow` fails, on Keras's PyTorch backend:
ExecuTorch's `.pte` (XNNPACK) and LiteRT through litert-torch, each verified in its own runtime
(`executorch.runtime`, `ai_edge_litert`) against the torch backend's outputs (issue 42).

Each case runs in a subprocess without TensorFlow (`test_torch_route.run_without_tensorflow`). The `.pte` needs
executorch in this interpreter (`pip install 'zoo[executorch]'`), the `.tflite` litert-torch's virtualenv
(`scripts/setup.sh --dev`); each case skips, saying why, without them.
"""

import importlib.util

import pytest

from tests.deploy.export.test_torch_route import run_without_tensorflow
from zoo.deploy.formats import torch_child

NO_EXECUTORCH = importlib.util.find_spec("executorch") is None
needs_executorch = pytest.mark.skipif(NO_EXECUTORCH, reason="executorch not installed: pip install 'zoo[executorch]'")

# Exports a LeNet-sized CNN (Conv2D, MaxPooling2D, Flatten, Dense: the layers Keras's torch backend lays out
# channels-last, which ExecuTorch's portable kernels refuse unless `executorch._for_xnnpack` drops the layout)
# to the formats asked, on the torch route in this process, then reads each artifact back as a user would.
_EXPORT = r"""
import json, sys
import numpy as np
import keras
import zoo.deploy.export
from zoo.deploy import formats
from zoo.deploy.export import ExportData

inputs = keras.Input((12, 12, 1), name="pixels")
x = keras.layers.MaxPooling2D()(keras.layers.Conv2D(4, 3, activation="relu")(inputs))
outputs = keras.layers.Dense(3, activation="softmax", name="predictions")(keras.layers.Flatten()(x))
model = keras.Model(inputs, outputs, name="cnn")
rng = np.random.default_rng(0)
x = rng.normal(size=(int(sys.argv[3]), 12, 12, 1)).astype("float32")
report = zoo.deploy.export.export(model, sys.argv[1], sys.argv[2].split(","), data=ExportData(test=x, calibration=x),
                                  latency_runs=0, isolate=False, class_names=["a", "b", "c"],
                                  precision=sys.argv[4].split(","))
reference = np.asarray(keras.ops.convert_to_numpy(model(x)))
out = {"tensorflow_loaded": sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"), "results": []}
for r in report.results:
    row = {"format": r.format, "variant": r.variant, "route": r.via, "status": r.status, "error": r.error,
           "max_abs_diff": r.verification and r.verification.max_abs_diff, "size": r.size_bytes}
    if r.path:
        kind = formats.detect(r.path)
        got = kind.open_runner(r.path).predict(x)
        row["outputs"] = sorted(got)
        row["own_diff"] = float(np.abs(np.asarray(next(iter(got.values()))) - reference).max())
        row["agreement"] = float((np.asarray(next(iter(got.values()))).argmax(1) == reference.argmax(1)).mean())
        row["class_names"] = list(formats.read_metadata(r.path).class_names)
        row["kind"], row["scan"] = kind.name, [f.op for f in kind.scan(r.path)[0]]
    out["results"].append(row)
print(json.dumps(out))
"""


def _export(tmp_path, formats: str, n: int = 8, precision: str = "float32") -> dict:
    out = run_without_tensorflow(_EXPORT, tmp_path, tmp_path / "out", formats, n, precision)
    assert out["tensorflow_loaded"] == []
    return {(r["format"], r["variant"]): r for r in out["results"]}


def _check_float(row, kind):
    assert row["status"] == "passed" and row["route"] == "torch", row
    assert row["max_abs_diff"] < 1e-5 and row["own_diff"] < 1e-5, row  # its runtime, against the torch backend
    assert row["outputs"] == ["predictions"] and row["class_names"] == ["a", "b", "c"], row
    assert row["kind"] == kind and row["scan"] == [], row


# What this machine has of the two: one export (one interpreter start) of every one present.
PRESENT = [name for name, absent in (("executorch", NO_EXECUTORCH),
                                     ("tflite", torch_child.venv_absent("litert_torch") is not None)) if not absent]


# With `-m slow`: the torch route's own formats are exported without TensorFlow by default
# (tests/deploy/export/test_torch_route.py); these two on-device ones cost 50 s of the 2-core suite (issue 39).
@pytest.mark.slow
@pytest.mark.skipif(not PRESENT, reason="neither executorch (pip install 'zoo[executorch]') nor "
                    f"litert-torch ({torch_child.venv_absent('litert_torch')}) is installed")
def test_pte_and_litert_torch_tflite_without_tensorflow_verified(tmp_path):
    rows = _export(tmp_path, ",".join(PRESENT))
    assert sorted(f for f, _ in rows) == sorted(PRESENT)
    for name in PRESENT:
        _check_float(rows[name, "float32"], name)
    if "executorch" in PRESENT:
        assert (tmp_path / "out" / "cnn_float32.pte.json").is_file()  # the sidecar: names and metadata


@pytest.mark.slow
@needs_executorch
def test_executorch_int8_by_pt2e(tmp_path):
    """PT2E int8 (XNNPACK quantizer) calibrated on the calibration data, verified on the int8 criterion."""
    rows = _export(tmp_path, "executorch", n=200, precision="float32,int8")
    float_row, int8 = rows["executorch", "float32"], rows["executorch", "int8"]
    _check_float(float_row, "executorch")
    assert int8["status"] == "passed", int8
    assert int8["agreement"] >= 0.9 and int8["own_diff"] < 0.05, int8
