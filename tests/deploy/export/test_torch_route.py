"""Export on the torch route (`zoo.deploy.formats.routes`) in a process where `import tensorflow` fails, on Keras's
PyTorch backend: ONNX (torch.onnx, dynamo), OpenVINO and `.pt2`, each verified in its own runtime against the
torch backend's outputs (issue 42).

Keras reads its backend once per process and this test process runs TensorFlow (tests/conftest.py), so each
case runs in a subprocess with the `no_tensorflow` sitecustomize (tests/training/no_tensorflow) on PYTHONPATH,
and returns what it measured as JSON. The models of the slow grid are Keras's own export test cases
(keras/src/export/torch_test.py, `get_model` and the named tests), each exported to the three formats.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NO_TENSORFLOW = ROOT / "tests" / "training" / "no_tensorflow"  # a sitecustomize that makes `import tensorflow` fail
FORMATS = ["onnx", "openvino", "torch"]


def run_without_tensorflow(code: str, cwd, *args, timeout: int = 600) -> dict:
    """Runs `code` in a PyTorch-backend Python that cannot import TensorFlow; its last stdout line, as JSON."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(PYTHONPATH=os.pathsep.join([str(NO_TENSORFLOW), str(ROOT), *inherited]), KERAS_BACKEND="torch",
               TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-4000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


# Exports the model `build()` makes to FORMATS in this process (isolate=False: one interpreter start), then reads
# each artifact back as a user would: its runner, its metadata, its scan.
_EXPORT = r"""
import json, sys
import numpy as np
import keras
import zoo.deploy.export
from zoo.deploy import formats
from zoo.deploy.export import ExportData

{build}

model = build()
rng = np.random.default_rng(0)
arrays = [rng.normal(size=(16, *t.shape[1:])).astype("float32") for t in model.inputs]
x = arrays[0] if len(arrays) == 1 else {{t.name: a for t, a in zip(model.inputs, arrays)}}
report = zoo.deploy.export.export(model, sys.argv[1], {formats!r}, data=ExportData(test=x), latency_runs=0,
                                  isolate=False, class_names={class_names!r})
keras_out = np.asarray(keras.ops.convert_to_numpy(model(x)))
out = {{"tensorflow_loaded": sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"), "results": []}}
for r in report.results:
    row = {{"format": r.format, "route": r.via, "status": r.status, "error": r.error,
           "max_abs_diff": r.verification and r.verification.max_abs_diff}}
    if r.path:
        kind = formats.detect(r.path)
        runner = kind.open_runner(r.path)
        got = runner.predict(x)
        row["outputs"] = sorted(got)
        row["inputs"] = [t.name for t in runner.inputs]
        row["own_diff"] = float(max(np.abs(np.asarray(v) - keras_out).max() for v in got.values())) \
            if len(got) == 1 else None
        meta = formats.read_metadata(r.path)
        row["class_names"] = list(meta.class_names) if meta and meta.class_names else None
        row["scan"] = [f.op for f in kind.scan(r.path)[0]]
    out["results"].append(row)
# the .pt2 tampered with: sample inputs whose pickle calls os.system (torch.export.load falls back to
# weights_only=False where the restricted unpickler refuses them), read by the scan as opcodes
import os, pickle, zipfile
class Shell:
    def __reduce__(self):
        return (os.system, ("true",))
pt2 = next(r.path for r in report.results if r.format == "torch")
with zipfile.ZipFile(pt2) as src, zipfile.ZipFile(sys.argv[1] + "/tampered.pt2", "w") as dst:
    for item in src.infolist():
        dst.writestr(item, pickle.dumps(Shell()) if "/sample_inputs/" in item.filename else src.read(item))
out["tampered_scan"] = [(f.op, f.location) for f in formats.detect(sys.argv[1] + "/tampered.pt2").scan(
    sys.argv[1] + "/tampered.pt2")[0]]
print(json.dumps(out))
"""

_SMALL = '''
def build():  # keras/src/export/torch_test.py get_model("functional"): Dense, BatchNormalization, Dense
    inputs = keras.Input((10,), name="features")
    x = keras.layers.Dense(10, activation="relu")(inputs)
    x = keras.layers.BatchNormalization()(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="predictions")(x)
    return keras.Model(inputs, outputs, name="small")
'''


def _export(tmp_path, build: str, formats=FORMATS, class_names=None) -> dict:
    code = _EXPORT.format(build=build, formats=formats, class_names=class_names)
    return run_without_tensorflow(code, tmp_path, tmp_path / "out")


def test_export_without_tensorflow_writes_onnx_openvino_and_pt2_verified(tmp_path):
    out = _export(tmp_path, _SMALL, class_names=["a", "b", "c"])
    assert out["tensorflow_loaded"] == []
    rows = {r["format"]: r for r in out["results"]}
    assert sorted(rows) == sorted(FORMATS)
    for name, row in rows.items():
        assert row["status"] == "passed" and row["route"] == "torch", row
        assert row["max_abs_diff"] < 1e-5, row  # verified in its runtime against the torch backend's outputs
        assert row["own_diff"] < 1e-5, row  # and again here, against Keras called directly
        assert row["inputs"] == ["features"] and row["outputs"] == ["predictions"], row
        assert row["class_names"] == ["a", "b", "c"] and row["scan"] == [], row
    import onnx

    dims = onnx.load(str(tmp_path / "out" / "small_float32.onnx")).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 10]
    assert [op for op, _ in out["tampered_scan"]] == [f"{os.system.__module__}.system"], out["tampered_scan"]
    assert "sample_inputs" in out["tampered_scan"][0][1]


# keras/src/export/torch_test.py: the named tests whose models the three formats take
_KERAS_CASES = {
    "sequential": '''
def build():  # get_model("sequential")
    model = keras.Sequential([keras.layers.Dense(10, activation="relu"), keras.layers.BatchNormalization(),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.build((None, 10))
    return model
''',
    "multi_input": '''
def build():  # get_model("multi_input"), test_model_with_multiple_inputs
    a, b = keras.Input((10,), name="input1"), keras.Input((10,), name="input2")
    x = keras.layers.concatenate([keras.layers.Dense(10, activation="relu")(a),
                                  keras.layers.Dense(10, activation="relu")(b)])
    return keras.Model([a, b], keras.layers.Dense(1, activation="sigmoid")(x))
''',
    "add_skip_connection": '''
def build():  # test_export_functional_with_add_skip_connection
    inputs = keras.Input((10,))
    x = keras.layers.Add()([keras.layers.Dense(16, activation="relu")(inputs), keras.layers.Dense(16)(inputs)])
    return keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Activation("relu")(x)))
''',
    "conv2d_channels_last": '''
def build():  # test_export_with_conv2d_channels_last
    return keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
                             keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(2)])
''',
    "batch_normalization": '''
def build():  # test_export_with_batch_normalization
    return keras.Sequential([keras.Input((10,)), keras.layers.Dense(16), keras.layers.BatchNormalization(),
                             keras.layers.Activation("relu"), keras.layers.Dense(8),
                             keras.layers.BatchNormalization(), keras.layers.Dense(1)])
''',
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(_KERAS_CASES))
def test_keras_export_cases_on_the_torch_route(case, tmp_path):
    out = _export(tmp_path, _KERAS_CASES[case])
    assert out["tensorflow_loaded"] == []
    for row in out["results"]:
        assert row["status"] == "passed" and row["route"] == "torch", row
        assert row["max_abs_diff"] < 1e-5, row


def test_planner_routes_and_refusals(monkeypatch, tmp_path):
    """The plan's routes where TensorFlow is installed (this process) and where it cannot be found (`Route.installed`
    patched): the default stays the SavedModel, `route="torch"` reaches ONNX, OpenVINO and .pt2 only."""
    import keras

    import zoo.deploy.export
    from zoo.deploy.formats import OptionError, routes

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)], name="tiny")
    plan = zoo.deploy.export.plan(model, tmp_path, ["onnx", "tflite"], verify=False)
    assert [t.route for t in plan.targets] == ["tensorflow", "tensorflow"]
    plan = zoo.deploy.export.plan(model, tmp_path, ["onnx", "torch"], verify=False, route="torch")
    assert [t.route for t in plan.targets] == ["torch", "torch"] and plan.needs_keras_file
    with pytest.raises(OptionError, match=r"route 'torch' does not reach tfjs .*Formats on the torch route: "
                                          r"tflite, onnx, openvino, torch, executorch"):
        zoo.deploy.export.plan(model, tmp_path, ["onnx", "tfjs"], route="torch")
    with pytest.raises(Exception, match="Did you mean"):
        zoo.deploy.export.plan(model, tmp_path, ["onnx"], route="trch")
    monkeypatch.setattr(routes.Route, "installed", property(lambda r: r.name != "tensorflow"))
    plan = zoo.deploy.export.plan(model, tmp_path, ["onnx", "openvino"], verify=False)
    assert [t.route for t in plan.targets] == ["torch", "torch"]
    with pytest.raises(OptionError, match=r"tfjs cannot be exported here: tensorflow cannot be imported .*pip "
                                          r"install tensorflow, or export to the formats this machine reaches: "
                                          r"tflite, onnx, openvino, torch"):
        zoo.deploy.export.plan(model, tmp_path, ["tfjs", "onnx"])
    with pytest.raises(OptionError, match="--check traces the model with TensorFlow, which cannot be imported"):
        zoo.deploy.export.check(model, ["onnx"])


def test_pt2_scan_reads_custom_op_namespaces(tmp_path):
    """The graph's ops outside PyTorch's namespaces (a library must register them), read from its JSON."""
    import zipfile

    from zoo.deploy.formats import torch as pt2

    path = tmp_path / "custom.pt2"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("m/archive_format", "pt2")
        z.writestr("m/models/model.json", json.dumps({"graph_module": {"graph": {"nodes": [
            {"target": "torch.ops.aten.relu.default"}, {"target": "torch.ops.mylib.shell.default"},
            {"target": "_operator.getitem"}]}}}))
    assert pt2.recognise(path) and not pt2.recognise(tmp_path)
    findings, scanned = pt2.scan(path)
    assert [(f.op, f.count) for f in findings] == [("torch.ops.mylib.shell.default", 1)] and scanned == 3


# issue 42's acceptance, in one process without TensorFlow: `zoo train --backend torch` on MNIST (its arrays
# file), `zoo export` of the run to ONNX, OpenVINO (float32 and int8) and .pt2, `zoo val` of the .pt2, and
# `zoo predict` on 10 test images written as PNG files, against the trained model's top-1 on Keras.
_ACCEPTANCE = r"""
import json, os, sys
import numpy as np
from PIL import Image
import keras
import zoo.data
from zoo.cli import main
from zoo.deploy.export.report import ExportReport

assert main(["train", "--backend", "torch", "--model", "lenet5", "--dataset", "mnist", "--epochs", "1",
             "--train-split", "train[:2048]", "--val-split", "test[:256]", "--test-split", "test[:512]",
             "--batch-size", "64", "--seed", "0", "--verbose", "0", "--out", "runs"]) == 0
run = "runs/lenet5-mnist"
code = main(["export", run, "--formats", "onnx,openvino,torch", "--precision", "float32,int8", "--dataset", "mnist",
             "--test-split", "test[:512]", "--train-split", "train[:200]", "--latency-runs", "0", "--out", "exp"])
report = json.load(open("exp/report.json"))
out = {"export": code, "results": [(r["format"], r["variant"], r["via"], r["status"], r["verification"]["max_abs_diff"],
                                    r["verification"]["argmax_agreement"]) for r in report["results"]]}
out["val"] = main(["val", "exp/lenet5.pt2", "--data", "mnist", "--split", "test[:512]", "--out", "val"])
ds = zoo.data.load("mnist", "test[:10]", 10, shuffle=False)
x, _ = ds[0]
os.makedirs("images", exist_ok=True)
for i, image in enumerate(x):
    Image.fromarray((np.asarray(image)[..., 0] * 255).round().astype(np.uint8)).save(f"images/{i}.png")
model = keras.saving.load_model(run + "/last.keras")
out["keras_top1"] = [str(c) for c in np.argmax(model.predict(np.round(x * 255) / 255, verbose=0), -1)]
out["predict"] = main(["predict", "exp/lenet5.pt2", *[f"images/{i}.png" for i in range(10)], "--top-k", "1",
                       "--format", "json", "--out", "predictions.json"])
out["pt2_top1"] = [p["class"] for p in json.load(open("predictions.json"))["predictions"]]
out["tensorflow_loaded"] = sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")
print(json.dumps(out))
"""


@pytest.mark.slow
def test_train_export_val_predict_without_tensorflow(tmp_path, real_mnist_dir, monkeypatch):
    monkeypatch.setenv("ZOO_DATA_DIR", real_mnist_dir)  # the child inherits it
    out = run_without_tensorflow(_ACCEPTANCE, tmp_path, timeout=1200)
    assert out["tensorflow_loaded"] == [] and out["export"] == 0 and out["val"] == 0 and out["predict"] == 0, out
    assert len(out["results"]) == 5, out  # onnx and openvino in float32 and int8, the .pt2
    for fmt, variant, via, status, diff, agreement in out["results"]:
        assert via == "torch" and status == "passed", out
        assert (diff < 1e-5 if variant in (None, "float32") else agreement >= 0.98), out
    assert out["pt2_top1"] == out["keras_top1"], out
