"""zoo.deploy.scan: hostile artifacts of every kind are flagged with the op and where it is, clean
zoo exports scan clean, nothing is executed, and serve / export / .keras loads refuse what the scan finds.

The hostile artifacts are built with the real tools (tf.saved_model.save, Keras, the TFLite converter,
onnx.helper) and, where no tool writes the hostile part, edited at the format level.
"""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import flatbuffers
import keras
import numpy as np
import onnx
import pytest
import tensorflow as tf
from onnx import TensorProto, helper

import zoo
import zoo.deploy.artifacts
import zoo.deploy.export
import zoo.deploy.formats
import zoo.deploy.scan
from zoo.deploy import scan
from zoo.deploy.artifacts import ModelFileError, load_model_file
from zoo.cli import main
from zoo.deploy.formats.saved_model import read_saved_model
from zoo.deploy.formats.unsafe import TF_OPS, Trust


def _save_module(path, fn, spec):
    class M(tf.Module):
        pass

    m = M()
    m.serve = tf.function(fn, input_signature=[spec])
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.serve})
    return path


def _tiny_model(name="tiny"):
    inp = keras.Input((4,), name="x")
    return keras.Model(inp, keras.layers.Dense(2, name="y")(inp), name=name)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """SavedModels whose serving function reads a file named by the request, or runs Python."""
    base = tmp_path_factory.mktemp("hostile")
    path_spec = tf.TensorSpec([], tf.string, name="path")
    x_spec = tf.TensorSpec([None], tf.float32, name="x")
    return {
        "read_file": _save_module(base / "read_file", lambda p: {"content": tf.io.read_file(p)}, path_spec),
        "py_function": _save_module(
            base / "py_function", lambda x: {"y": tf.py_function(lambda v: v * 2, [x], tf.float32)}, x_spec),
        "numpy_function": _save_module(
            base / "numpy_function", lambda x: {"y": tf.numpy_function(lambda v: v * 2, [x], tf.float32)}, x_spec),
    }


@pytest.fixture(scope="module")
def clean_export(every_format_export, tmp_path_factory):
    """The session's zoo export of a tiny model in every default format (tests/conftest.py), beside a .keras file."""
    out = tmp_path_factory.mktemp("export")
    for artifact in Path(every_format_export[2].out_dir).iterdir():
        (out / artifact.name).symlink_to(artifact)
    keras.utils.set_random_seed(0)
    _tiny_model("tiny_keras").save(out / "tiny.keras")
    return out


# ---- the table ----------------------------------------------------------------------------------------------

def test_every_tensorflow_op_in_the_table_is_registered_in_tensorflow():
    """The table names real ops (TensorFlow's op registry is the reference), so no entry is a typo."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    ops = op_def_pb2.OpList()
    ops.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    registered = {op.name for op in ops.op}
    assert sorted(set(TF_OPS) - registered) == []
    # what ModelScan flags (protectai/modelscan settings.py: unsafe_tf_operators), minus TF1's PyCall
    assert {"ReadFile", "WriteFile", "MatchingFiles", "PyFunc", "PyFuncStateless", "EagerPyFunc"} <= set(TF_OPS)


# ---- SavedModel -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, op, capability", [
    ("read_file", "ReadFile", "filesystem"),
    ("py_function", "EagerPyFunc", "code_execution"),
    ("numpy_function", "PyFunc", "code_execution"),
])
def test_hostile_saved_models_are_flagged_with_the_function_holding_the_op(hostile, name, op, capability):
    report = scan.scan(hostile[name])
    assert report.kind == "saved_model" and not report.clean
    assert [(f.op, str(f.capability)) for f in report.findings] == [(op, capability)]
    location = report.findings[0].location
    assert location.startswith("function '__inference_") and "signature 'serving_default'" in location


def test_an_op_in_a_function_no_signature_calls_is_flagged_too(tmp_path):
    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def serve(self, x):
            return {"y": x * 2}

        @tf.function(input_signature=[tf.TensorSpec([], tf.string)])
        def dump(self, path):
            with tf.control_dependencies([tf.io.write_file(path, "x")]):
                return tf.constant(1)

    m = M()
    tf.saved_model.save(m, str(tmp_path / "m"), signatures={"serving_default": m.serve})
    [finding] = scan.scan(tmp_path / "m").findings
    assert finding.op == "WriteFile" and "dump" in finding.location and "signature" not in finding.location


def test_checkpoint_ops_are_expected_in_the_saver_but_flagged_in_a_serving_function(tmp_path, clean_export):
    library = read_saved_model(clean_export / "saved_model" / "tiny" / "1").meta_graphs[0].graph_def.library
    saver_ops = [n.op for f in library.function for n in f.node_def]
    assert "RestoreV2" in saver_ops and "SaveV2" in saver_ops  # present, and the export scans clean (below)
    restore = _save_module(tmp_path / "restore", lambda p: {"y": tf.raw_ops.RestoreV2(
        prefix=p, tensor_names=["v"], shape_and_slices=[""], dtypes=[tf.float32])[0]},
        tf.TensorSpec([], tf.string, name="prefix"))
    [finding] = scan.scan(restore).findings
    assert finding.op == "RestoreV2" and "signature 'serving_default'" in finding.location


def test_the_scan_never_runs_the_graph_which_loading_would(tmp_path):
    """A TF1 SavedModel whose main op (run at load) writes a file: scanning writes nothing, loading does."""
    marker = tmp_path / "written_at_load.txt"
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        signature = tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": tf.identity(x * 2, name="y")})
        builder = tf.compat.v1.saved_model.Builder(str(tmp_path / "tf1"))
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": signature},
                                             main_op=tf.io.write_file(str(marker), "pwned"))
        builder.save()
    [finding] = scan.scan(tmp_path / "tf1").findings
    assert finding.op == "WriteFile" and "the init op" in finding.location
    assert not marker.exists()
    tf.saved_model.load(str(tmp_path / "tf1"))  # the hazard the scan guards against is real
    assert marker.read_text() == "pwned"


def test_a_keras_2_saved_model_is_checked_for_lambda_layers_in_its_keras_metadata(tmp_path):
    """tf_keras writes each layer's config to keras_metadata.pb; `tf_keras.models.load_model` runs Lambdas."""
    import tf_keras

    inp = tf_keras.Input((3,), name="x")
    tf_keras.Model(inp, tf_keras.layers.Lambda(lambda v: v * 2, name="double")(inp)).save(tmp_path / "lam")
    [finding] = scan.scan(tmp_path / "lam").findings
    assert finding.op == "Lambda" and finding.location.startswith("keras_metadata.pb node 'root'")
    assert finding.location.endswith("Lambda 'double'")
    tf_keras.Model(inp, tf_keras.layers.Dense(2, name="d")(inp)).save(tmp_path / "dense")
    assert scan.scan(tmp_path / "dense").clean


# ---- clean exports ------------------------------------------------------------------------------------------

HAS_OPENVINO = "openvino" in zoo.deploy.formats.DEFAULT_FORMATS
OPENVINO = [("tiny_openvino_float32", "openvino"), ("tiny_openvino_float32/model.xml", "openvino")] if HAS_OPENVINO \
    else []


@pytest.mark.parametrize("artifact, kind", [
    ("saved_model/tiny/1", "saved_model"), ("tiny_float32.tflite", "tflite"), ("tiny_float32.onnx", "onnx"),
    ("tfjs_float32", "tfjs"), ("tfjs_float32/model.json", "tfjs"), ("tiny.keras", "keras"),
    ("saved_model/tiny/1/saved_model.pb", "saved_model"), *OPENVINO,
])
def test_a_clean_zoo_export_scans_clean(clean_export, artifact, kind):
    report = scan.scan(clean_export / artifact)
    assert (report.kind, report.findings) == (kind, [])
    assert report.clean and report.items > 0


@pytest.mark.parametrize("name", ["lenet5", "mixer_s16", "tcn", "char_lstm_lm"])
def test_zoo_architectures_saved_as_keras_files_scan_clean(tmp_path, name):
    """zoo's own registered classes (ZooModel, its layers) are trusted: a trained zoo model is not refused."""
    zoo.build(name).save(tmp_path / "m.keras")
    assert scan.scan(tmp_path / "m.keras").findings == []


def test_scanning_loads_neither_tensorflow_nor_keras(hostile, clean_export):
    """The readers parse protos, flatbuffers and JSON; nothing that could run the artifact is imported."""
    paths = [str(hostile["read_file"])] + [str(clean_export / p) for p in (
        "tiny.keras", "tiny_float32.tflite", "tiny_float32.onnx", "tfjs_float32", *(p for p, _ in OPENVINO))]
    code = (f"import sys; from zoo.deploy import scan; [scan.scan(p) for p in {paths!r}]; "
            "print(sorted(m for m in ('tensorflow', 'keras', 'tf_keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path(zoo.__file__).parents[1])})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


# ---- Keras -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lambda_model(tmp_path_factory):
    inp = keras.Input((3,), name="x")
    model = keras.Model(inp, keras.layers.Lambda(lambda v: v * 2, name="double")(inp), name="lam")
    folder = tmp_path_factory.mktemp("keras")
    model.save(folder / "lam.keras")
    model.save(folder / "lam.h5")  # Keras's legacy HDF5 format
    return folder


@pytest.mark.parametrize("file", ["lam.keras", "lam.h5"])
def test_a_lambda_layer_is_flagged_with_its_name(lambda_model, file):
    [finding] = scan.scan(lambda_model / file).findings
    assert (finding.op, str(finding.capability)) == ("Lambda", "code_execution")
    assert finding.location == "Functional 'lam' > Lambda 'double'"


def test_keras_loads_refuse_the_lambda_by_name_unless_allowed_and_unsafe_deserialization(lambda_model):
    path = lambda_model / "lam.keras"
    with pytest.raises(scan.UnsafeArtifactError, match=r"Lambda \(code_execution\) in Functional 'lam' > "
                                                          r"Lambda 'double'.*--allow-unsafe-ops Lambda"):
        load_model_file(path)
    with pytest.raises(ModelFileError, match="safe_mode refused .*Lambda in Functional 'lam' > Lambda 'double'.*"
                                             "--unsafe-deserialization"):
        load_model_file(path, trust=Trust(["Lambda"]))
    model = load_model_file(path, trust=Trust("Lambda", unsafe_deserialization=True))
    np.testing.assert_allclose(model.predict(np.array([[1.0, 2.0, 3.0]]), verbose=0), [[2.0, 4.0, 6.0]])


class Unregistered(keras.layers.Layer):
    def call(self, x):
        return x


def _edit_config(src, dst, edit):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                edit(config)
                data = json.dumps(config).encode()
            zout.writestr(item, data)
    return dst


def test_custom_classes_and_non_modeling_functions_in_a_keras_config(tmp_path):
    inp = keras.Input((3,), name="x")
    keras.Model(inp, Unregistered(name="mine")(inp), name="custom").save(tmp_path / "custom.keras")
    [finding] = scan.scan(tmp_path / "custom.keras").findings
    assert finding.op.endswith("Unregistered") and "Unregistered 'mine'" in finding.location
    assert str(finding.capability) == "code_execution"

    def fetch(config):  # an activation that downloads: what CVE-2025-9906-style configs do
        dense = next(layer for layer in config["config"]["layers"] if layer["class_name"] == "Dense")
        dense["config"]["activation"] = {"module": "keras.utils", "class_name": "function", "config": "get_file",
                                         "registered_name": "get_file"}

    _tiny_model().save(tmp_path / "tiny.keras")
    [finding] = scan.scan(_edit_config(tmp_path / "tiny.keras", tmp_path / "fetch.keras", fetch)).findings
    assert (finding.op, str(finding.capability)) == ("keras.utils.get_file", "network")
    assert "Dense 'y'" in finding.location


def test_plain_h5_models_and_weights_files_are_clean(tmp_path):
    _tiny_model().save_weights(tmp_path / "w.weights.h5")
    assert scan.scan(tmp_path / "w.weights.h5").clean
    _tiny_model().save(tmp_path / "tiny.h5")  # Keras's legacy format: a model_config attribute
    assert scan.scan(tmp_path / "tiny.h5").clean


# ---- TFLite ----------------------------------------------------------------------------------------------------

def _tflite_with_custom_codes(data: bytes, codes: list) -> bytes:
    """The converter's flatbuffer with its operator codes replaced by custom ones (what a hostile file holds)."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(data, 0))
    op = model.subgraphs[0].operators[0]
    model.operatorCodes, model.subgraphs[0].operators = [], []
    for code in codes:
        entry = schema.OperatorCodeT()
        entry.builtinCode = entry.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
        entry.customCode = code
        model.operatorCodes.append(entry)
        clone = schema.OperatorT()
        clone.opcodeIndex, clone.inputs, clone.outputs = len(model.operatorCodes) - 1, op.inputs, op.outputs
        model.subgraphs[0].operators.append(clone)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def test_tflite_flex_and_custom_ops(tmp_path, clean_export):
    data = (clean_export / "tiny_float32.tflite").read_bytes()
    path = tmp_path / "hostile.tflite"
    path.write_bytes(_tflite_with_custom_codes(data, [b"FlexReadFile", b"FlexAddV2", b"MyVendorOp",
                                                      b"TFLite_Detection_PostProcess"]))
    found = {f.op: f for f in scan.scan(path).findings}
    assert sorted(found) == ["FlexReadFile", "MyVendorOp"]  # FlexAddV2 and the runtime's own custom op are fine
    assert str(found["FlexReadFile"].capability) == "filesystem" and "ReadFile" in found["FlexReadFile"].why
    assert found["FlexReadFile"].location == "subgraph 0 'main', operator 0"
    assert str(found["MyVendorOp"].capability) == "code_execution"


# ---- ONNX ------------------------------------------------------------------------------------------------------

def test_onnx_custom_domain_and_external_data_outside_the_folder(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    weights = []
    for name, location in (("inside", "weights.bin"), ("outside", "../../etc/passwd")):
        t = helper.make_tensor(name, TensorProto.FLOAT, [1], [0.0])
        t.ClearField("float_data")
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value=location)
        weights.append(t)
    nodes = [helper.make_node("Add", ["x", "inside"], ["a"], name="add"),
             helper.make_node("Gelu", ["a"], ["b"], domain="com.vendor", name="vendor_gelu"),
             helper.make_node("Add", ["b", "outside"], ["y"], name="add2")]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                              initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.vendor", 1)])
    onnx.save(model, tmp_path / "m.onnx")
    found = {f.op: f for f in scan.scan(tmp_path / "m.onnx").findings}
    assert sorted(found) == ["com.vendor.Gelu", "external data"]
    assert found["com.vendor.Gelu"].location == "graph 'g' node 'vendor_gelu'"
    assert "'outside'" in found["external data"].location and "../../etc/passwd" in found["external data"].why


# ---- OpenVINO --------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not HAS_OPENVINO, reason="openvino not installed (pip install 'zoo[openvino]')")
def test_openvino_extension_ops_are_flagged_and_refused_unless_accepted(tmp_path, clean_export):
    """An IR layer outside OpenVINO's opsets runs an extension's native code; zoo export's IRs hold none."""
    import shutil
    import xml.etree.ElementTree as ET

    folder = tmp_path / "ir"
    shutil.copytree(clean_export / "tiny_openvino_float32", folder)
    tree = ET.parse(folder / "model.xml")
    layer = next(layer for layer in tree.getroot().iter("layer") if layer.get("type") == "MatMul")
    layer.set("version", "vendor_ext")
    tree.write(folder / "model.xml")
    (finding,) = scan.scan(folder).findings
    assert (finding.op, str(finding.capability)) == ("vendor_ext.MatMul", "code_execution")
    assert finding.location == f"layer '{layer.get('name')}'"
    with pytest.raises(scan.UnsafeArtifactError, match="--allow-unsafe-ops vendor_ext.MatMul"):
        zoo.deploy.artifacts.load(folder)  # zoo predict, zoo val: refused before OpenVINO reads it
    assert scan.require_safe(folder, Trust("vendor_ext.MatMul")).findings == [finding]


# ---- TF.js -----------------------------------------------------------------------------------------------------

def test_tfjs_graph_model_ops_and_weight_paths(tmp_path, clean_export):
    model = json.loads((clean_export / "tfjs_float32" / "model.json").read_text())
    model["modelTopology"].setdefault("library", {})["function"] = [{
        "signature": {"name": "__inference_leak_1"},
        "nodeDef": [{"name": "read", "op": "ReadFile", "input": ["path"]}],
    }]
    model["weightsManifest"][0]["paths"].append("../../secrets.bin")
    (tmp_path / "model.json").write_text(json.dumps(model))
    found = {f.op: f for f in scan.scan(tmp_path / "model.json").findings}
    assert sorted(found) == ["ReadFile", "external data"]
    assert found["ReadFile"].location == "function '__inference_leak_1'"
    assert "../../secrets.bin" in found["external data"].why


def test_tfjs_layers_model_with_a_lambda(tmp_path):
    topology = {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "Dense", "config": {"name": "d", "units": 2}},
        {"class_name": "Lambda", "config": {"name": "evil", "function": ["4wAAAA==", None, None]}},
        {"class_name": "MyCustomLayer", "config": {"name": "c"}}]}}
    (tmp_path / "model.json").write_text(json.dumps({"format": "layers-model", "modelTopology": topology,
                                                     "weightsManifest": []}))
    found = {f.op: f.location for f in scan.scan(tmp_path / "model.json").findings}
    assert found == {"Lambda": "Sequential 's' > Lambda 'evil'", "MyCustomLayer": "Sequential 's' > MyCustomLayer 'c'"}


# ---- bad input ---------------------------------------------------------------------------------------------------

def test_unreadable_artifacts_are_clear_errors(tmp_path):
    with pytest.raises(scan.ArtifactError, match="does not exist"):
        scan.scan(tmp_path / "missing.keras")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(scan.ArtifactError, match="not a model artifact zoo knows. Expected one of: saved_model: "):
        scan.scan(tmp_path / "notes.txt")
    (tmp_path / "base" / "m" / "1").mkdir(parents=True)
    with pytest.raises(scan.ArtifactError, match="scan a version directory"):
        scan.scan(tmp_path / "base" / "m")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"\xff\xff\xff not a proto")
    with pytest.raises(scan.ArtifactError, match="not a valid SavedModel"):
        scan.scan(broken)
    (tmp_path / "deep.json").write_text('{"modelTopology": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(scan.ArtifactError):
        scan.scan(tmp_path / "deep.json")


def test_allow_lists_take_exact_names_only(hostile):
    for wildcard in ("*", "all", "Read*", "ALL"):
        with pytest.raises(scan.AllowListError, match="exact op names"):
            scan.require_safe(hostile["read_file"], wildcard)
    with pytest.raises(scan.AllowListError, match="Did you mean: ReadFile"):
        scan.require_safe(hostile["read_file"], "ReadFil")
    with pytest.raises(scan.UnsafeArtifactError, match="ReadFile"):
        scan.require_safe(hostile["read_file"], "EagerPyFunc")  # a known op, just not this one
    assert scan.require_safe(hostile["read_file"], "ReadFile").findings[0].op == "ReadFile"


# ---- the commands --------------------------------------------------------------------------------------------------

def test_zoo_scan_exit_codes_and_json(hostile, clean_export, capsys):
    assert main(["scan", str(clean_export / "saved_model" / "tiny" / "1")]) == 0
    assert "clean" in capsys.readouterr().out
    assert main(["scan", str(hostile["read_file"]), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["clean"] is False and [f["op"] for f in out["findings"]] == ["ReadFile"]
    assert main(["scan", str(clean_export / "tiny_float32.onnx"), str(hostile["py_function"])]) == 1
    assert "EagerPyFunc" in capsys.readouterr().out
    assert main(["scan", str(clean_export / "nothing.onnx")]) == 2


@pytest.mark.parametrize("name, op", [("read_file", "ReadFile"), ("py_function", "EagerPyFunc")])
def test_zoo_serve_and_zoo_export_refuse_hostile_saved_models_naming_the_op(tmp_path, hostile, name, op, capsys):
    base = tmp_path / "saved_models"
    (base / name).mkdir(parents=True)
    os.symlink(hostile[name], base / name / "1")
    assert main(["serve", str(base), "--rest-port", "0", "--grpc-port", "0", "--poll-s", "0"]) == 2
    err = capsys.readouterr().err
    assert f"Refusing {base / name / '1'}" in err and f"{op} (" in err and f"--allow-unsafe-ops {op}" in err
    assert main(["export", str(hostile[name]), "--out", str(tmp_path / "out"), "--no-verify"]) == 2
    err = capsys.readouterr().err
    assert "Refusing" in err and f"{op} (" in err
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_keras_lambda_and_runs_it_only_when_told_both(lambda_model, tmp_path, capsys):
    path = str(lambda_model / "lam.keras")
    assert main(["export", path, "--out", str(tmp_path / "a"), "--formats", "saved_model", "--no-verify"]) == 2
    assert "Lambda 'double'" in capsys.readouterr().err
    assert main(["export", path, "--out", str(tmp_path / "a"), "--formats", "saved_model", "--no-verify",
                 "--allow-unsafe-ops", "Lambda"]) == 2
    assert "--unsafe-deserialization" in capsys.readouterr().err
    report = zoo.deploy.export.export(path, tmp_path / "b", "saved_model", verify=False, latency_runs=0, isolate=False,
                               trust=Trust(allow_unsafe_ops="Lambda", unsafe_deserialization=True))
    assert report.ok
    assert scan.scan(tmp_path / "b" / "saved_model" / "lam" / "1").clean  # the Lambda became graph ops


def test_a_distillation_teacher_file_is_scanned_too(lambda_model, tmp_path):
    from types import SimpleNamespace

    from zoo.training.features.distillation import Distillation

    config = SimpleNamespace(teacher=str(lambda_model / "lam.keras"), distill_alpha=0.5, distill_temperature=4.0)
    with pytest.raises(scan.UnsafeArtifactError, match="Lambda 'double'"):
        Distillation.from_config(config)
    zoo.build("mlp", width=8, depth=1).save(tmp_path / "teacher.keras")
    config.teacher = str(tmp_path / "teacher.keras")
    assert Distillation.from_config(config).teacher.trainable is False
