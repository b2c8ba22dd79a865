"""Parity of every format and TFLite precision with Keras, each artifact run through its runtime's own API.

The reference is Keras's own output on real MNIST test examples. The artifacts are opened with the
runtimes' raw APIs (`tf.saved_model.load`, the LiteRT `Interpreter`, `onnxruntime.InferenceSession`),
not with zoo's runners or its verification, so a bug in `zoo.deploy.export.verify` or in a runner cannot make
these pass. TF.js runs in Node through zoo's runner script (the only way to run it here); its outputs
are compared with Keras's here, not by zoo's verification. A small CNN and an LSTM classifier (time
axis None) are briefly trained, so that int8 argmax agreement and accuracy mean something.
"""

import json
from pathlib import Path

import keras
import numpy as np
import pytest

import zoo
import zoo.data
import zoo.deploy.export
import zoo.deploy.export.verify
import zoo.deploy.formats.saved_model
import zoo.deploy.formats.tfjs
from zoo.deploy.export import ExportData
from tests.conftest import slow_run
from zoo.deploy.formats.saved_model import SERVING_SIGNATURE

ALL_TFLITE = ("float32", "float16", "dynamic_int8", "int8")
ONNX_OPENVINO = ("float32", "float16", "int8")  # what ONNX and OpenVINO offer of ALL_TFLITE
EVAL = 300
MAX_ABS_DIFF = {"float32": 1e-4, "float16": 1e-2}
MIN_INT8_AGREEMENT = 0.99
MAX_INT8_ACCURACY_LOSS = 0.02
INT8_KERNEL_STEPS = 4


def _trained(name, dataset, steps, **kwargs):
    keras.utils.set_random_seed(0)
    model = zoo.build(name, **kwargs)
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=False)
    model.fit(zoo.data.load(dataset, "train", 128, seed=0).take(steps), epochs=1, verbose=0)
    return model


def _test_split(dataset):
    x, y = next(iter(zoo.data.load(dataset, "test", 1000)))
    return np.asarray(x)[:EVAL], np.asarray(y)[:EVAL]


def _export(model, dataset, out, precisions=ALL_TFLITE, weight_quantization=("float32", "uint8")):
    return zoo.deploy.export.export(
        model, out, precision=precisions, weight_quantization=weight_quantization,
        data=ExportData(calibration=zoo.data.load(dataset, "train", 100, seed=1),
                        test=zoo.data.load(dataset, "test", 1000), max_test_samples=EVAL,
                        description=f"{dataset} test split"), calibration_samples=300,
        latency_runs=5,
    )


# --- the artifacts in their runtimes' own APIs ---------------------------------------------------------


def saved_model_outputs(path, x):
    import tensorflow as tf

    signature = tf.saved_model.load(str(path)).signatures[SERVING_SIGNATURE]
    (name,) = signature.structured_input_signature[1]
    return signature(**{name: tf.constant(x)})["predictions"].numpy()


def litert_outputs(path, x):
    """Outputs of the `.tflite` in LiteRT's Interpreter (batch-1 calls where the signature fixes the batch).

    LiteRT's own kernels, without the XNNPACK delegate zoo's runner uses: XNNPACK refuses some full-int8
    unrolled RNNs, and the builtin kernels are the reference implementation of every op.
    """
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=str(path),
                              experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    runner = interpreter.get_signature_runner(SERVING_SIGNATURE)
    ((name, detail),) = runner.get_input_details().items()
    step = detail["shape_signature"][0] if detail["shape_signature"][0] > 0 else len(x)
    return np.concatenate([runner(**{name: x[i : i + step]})["predictions"] for i in range(0, len(x), step)])


def litert_tensor_types(path) -> set:
    """Types of the tensors in every subgraph of the flatbuffer (RNN loop bodies are subgraphs of their own)."""
    from ai_edge_litert import schema_py_generated as schema

    names = {v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    model = schema.Model.GetRootAsModel(open(path, "rb").read(), 0)
    return {names[graph.Tensors(j).Type()] for graph in map(model.Subgraphs, range(model.SubgraphsLength()))
            for j in range(graph.TensorsLength())}


def onnx_outputs(path, x):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["predictions"], {session.get_inputs()[0].name: x})[0]


def openvino_outputs(path, x):
    import openvino as ov

    compiled = ov.Core().compile_model(str(path / "model.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled(x)[compiled.output("predictions")]


def tfjs_outputs(path, x):
    from zoo.deploy.formats.tfjs import TFJSRunner

    return TFJSRunner(path).predict(x)["predictions"]


RAW = {"saved_model": saved_model_outputs, "tflite": litert_outputs, "onnx": onnx_outputs, "tfjs": tfjs_outputs,
       "openvino": lambda path, x: openvino_outputs(Path(path), x)}
# What the .tflite of each precision must hold: float16 or int8 tensors where quantized, neither in float32.
TFLITE_TENSORS = {"float32": lambda t: not t & {"int8", "float16"}, "float16": lambda t: "float16" in t,
                  "dynamic_int8": lambda t: "int8" in t, "int8": lambda t: "int8" in t and "float16" not in t}


def _check_against_keras(model, report, out, x, y, int8_floor=None, precisions=ALL_TFLITE, tfjs=("float32", "uint8")):
    """`int8_floor`: where an int8 artifact's own verification may miss 99% (a briefly trained model's near-ties,
    which TensorFlow's CPU op order moves between runs), the agreement it must still reach here."""
    failed = [r for r in report.results if r.status != "passed"]
    if int8_floor is None:
        assert report.ok, report.table()
    else:
        assert all(r.precision == "int8" and r.path and r.verification is not None
                   and r.verification.argmax_agreement >= int8_floor for r in failed), report.table()
    assert [(r.format, r.variant) for r in report.results] == [
        ("saved_model", None), *[("tflite", q) for q in precisions], *[("tfjs", q) for q in tfjs],
        *[(f, p) for f in ("onnx", "openvino") for p in ONNX_OPENVINO if p in precisions]]
    keras_out = model.predict(x, verbose=0)
    keras_accuracy = float(np.mean(np.argmax(keras_out, -1) == y))
    assert report.keras.accuracy == pytest.approx(keras_accuracy, abs=1e-9)
    for r in report.results:
        got = RAW[r.format](r.path, x)
        assert got.shape == keras_out.shape == (EVAL, 10), r.label
        diff = float(np.max(np.abs(got.astype(np.float64) - keras_out)))
        agreement = float(np.mean(np.argmax(got, -1) == np.argmax(keras_out, -1)))
        accuracy = float(np.mean(np.argmax(got, -1) == y))
        if r.precision in MAX_ABS_DIFF:
            assert diff <= MAX_ABS_DIFF[r.precision], (r.label, diff)
        else:
            assert agreement >= (int8_floor or MIN_INT8_AGREEMENT), (r.label, agreement)
            assert accuracy >= keras_accuracy - MAX_INT8_ACCURACY_LOSS, (r.label, accuracy, keras_accuracy)
        if r.format == "tflite":
            types = litert_tensor_types(r.path)
            assert TFLITE_TENSORS[r.variant](types), (r.label, types)
        # The report states what the runtime computes. zoo runs int8 .tflite files through XNNPACK, whose
        # int8 kernels round differently from LiteRT's reference kernels used above: a few output steps.
        v = r.verification
        exact = r.precision in MAX_ABS_DIFF or r.format != "tflite"
        assert v.max_abs_diff == pytest.approx(diff, abs=1e-5 if exact else INT8_KERNEL_STEPS / 256), (r.label, diff)
        assert v.accuracy == pytest.approx(accuracy, abs=1e-9 if exact else INT8_KERNEL_STEPS / EVAL), r.label
        assert v.eval_samples == EVAL and v.latency_runs == 5 and v.latency_ms > 0 and r.size_bytes > 0
    data = json.loads((out / "report.json").read_text())
    assert data["ok"] is report.ok is (not failed) and len(data["results"]) == len(report.results)
    card = (out / "report.md").read_text()
    assert card.startswith(f"# {report.model['name']}")
    assert card.count("| passed |") == len(report.results) - len(failed), card


@pytest.mark.usefixtures("real_mnist_dir")
def test_cnn_every_format_and_precision(tmp_path):
    model = _trained("convnet_bn", "mnist", 120)
    report = _export(model, "mnist", tmp_path)
    x, y = _test_split("mnist")
    _check_against_keras(model, report, tmp_path, x, y)
    assert report.keras.accuracy > 0.9
    assert (tmp_path / "saved_model" / "convnet_bn" / "1" / "saved_model.pb").is_file()
    assert (tmp_path / "tfjs_uint8" / "model.json").is_file()
    assert {r.route for r in report.results if r.format == "tflite"} == {"dynamic_batch"}


@pytest.mark.usefixtures("real_mnist_dir")
def test_lstm_with_variable_time_axis_every_format_and_precision(tmp_path, request):
    model = _trained("lstm_classifier", "mnist_sequence", 600, input_shape=(None, 28), units=64)
    assert model.input_shape == (None, None, 28)
    # Each route an RNN takes, in every format: TFLite's fixed batch (float32; float16 and dynamic int8 take it too,
    # with `-m slow`) and its unrolled rebuild (int8), int8 in ONNX and OpenVINO. The precisions that convert an RNN
    # as they do the CNN above (float16, TF.js's uint8 weights) only with `-m slow` (suite time, issue 39: 25 s).
    slow = slow_run(request.config)
    precisions = ALL_TFLITE if slow else ("float32", "int8")
    tfjs = ("float32", "uint8") if slow else ("float32",)
    report = _export(model, "mnist_sequence", tmp_path, precisions, tfjs)
    x, y = _test_split("mnist_sequence")
    # Its TFLite int8 (the unrolled route) agreed on 98.3-100% of the 300 images across runs of the suite.
    _check_against_keras(model, report, tmp_path, x, y, int8_floor=0.98, precisions=precisions, tfjs=tfjs)
    routes = {r.variant: r.route for r in report.results if r.format == "tflite"}
    # Fixed batch keeps the variable time axis; full int8 needs the unrolled rebuild.
    assert routes == {"float32": "fixed_batch", "float16": "fixed_batch", "dynamic_int8": "fixed_batch",
                      "int8": "unrolled"} if slow else {"float32": "fixed_batch", "int8": "unrolled"}
    assert "control flow v2" in report.result("tfjs", "float32").notes
    # The variable time axis survives where the route keeps it: a shorter sequence runs.
    short = x[:4, :20]
    np.testing.assert_allclose(litert_outputs(report.result("tflite", "float32").path, short),
                               model.predict(short, verbose=0), atol=1e-4)


# With `-m slow`: the default run takes the RNN routes of every TFLite precision with the LSTM above, and the GRU in
# every format in float32 (tests/deploy/export/test_every_architecture_exports.py; suite time, issue 39: 28 s).
@pytest.mark.slow
def test_stacked_bidirectional_gru_converts_in_every_tflite_precision(tmp_path):
    """Untrained, random inputs: every route converts and runs, and each file holds the precision it says.
    int8 is held to an absolute bound (argmax agreement means nothing on near-uniform untrained outputs).
    32 units: smaller weight matrices (< 1024 elements) are left float by dynamic-range quantization."""
    keras.utils.set_random_seed(0)
    model = zoo.build("gru_classifier", input_shape=(None, 6), num_classes=4, units=32, num_layers=2,
                      bidirectional=True)
    x = np.random.default_rng(0).random((32, 12, 6), dtype=np.float32)
    report = zoo.deploy.export.export(model, tmp_path, ["tflite"], precision=ALL_TFLITE,
                               data=ExportData(calibration=x, test=(x, np.zeros(32, np.int32))), latency_runs=0)
    keras_out = model.predict(x, verbose=0)
    for r in report.results:
        got = litert_outputs(r.path, x)
        diff = float(np.max(np.abs(got - keras_out)))
        if r.precision in MAX_ABS_DIFF:
            assert r.status == "passed" and diff <= MAX_ABS_DIFF[r.precision], (r.label, diff, report.table())
        else:  # within two steps of the int8 softmax output's scale, 1/256 (measured: 0.0007 and 0.0033)
            assert diff <= 2 / 256, (r.label, diff)
        assert TFLITE_TENSORS[r.variant](litert_tensor_types(r.path)), r.label


def test_tfjs_runs_rnns_returning_sequences_via_the_unrolled_route(tmp_path):
    """tfjs 4.22 cannot run control-flow RNNs that return sequences; the unrolled rebuild at `sequence_length` runs."""
    keras.utils.set_random_seed(0)
    model = zoo.build("char_lstm_lm", input_shape=(None,), num_classes=65, embed_dim=16, units=32)
    report = zoo.deploy.export.export(model, tmp_path, ["tfjs"], sequence_length=20, latency_runs=0)
    (r,) = report.results
    assert r.status == "passed", report.table()
    assert r.route == "unrolled" and "RNN unrolled; input shape fixed to (batch, 20)" in r.notes
    # The variable-length control flow v2 graph is tried first; its runtime failure is reported.
    assert [a.route for a in r.attempts] == ["control_flow_v2"]
    assert "reading 'backend'" in r.attempts[0].error
    x = np.random.default_rng(0).integers(0, 65, (8, 20)).astype("int32")
    from zoo.deploy.formats.tfjs import TFJSRunner

    got = TFJSRunner(r.path).predict(x)["logits"]
    np.testing.assert_allclose(got, model.predict(x, verbose=0), atol=1e-4)


def test_an_unrolled_rnn_exports_as_its_loop(tmp_path):
    """`unroll=True` (the mnist_lstm recipe's) is a training-speed choice: the export starts from the loop.
    Converted as it was, the TF.js graph model held the LSTM's weights once per time step (28x)."""
    keras.utils.set_random_seed(0)
    model = zoo.build("lstm_classifier", input_shape=(28, 28), units=32, unroll=True)
    report = zoo.deploy.export.export(model, tmp_path, ["tfjs"], verify=False, latency_runs=0)
    (r,) = report.results
    assert r.status == "exported" and "control flow v2" in r.notes, report.table()
    weight_bytes = sum(p.stat().st_size for p in Path(r.path).glob("*.bin"))
    assert weight_bytes <= 4 * model.count_params() * 1.05, (weight_bytes, model.count_params())
    assert model.get_layer("lstm1").unroll  # the user's model is left as it was
