"""ONNX float16/int8, OpenVINO, the accuracy-budgeted int8 and Flex (issue 16), each checked through the
runtimes' own APIs or the artifacts' own contents, not through zoo's runners."""

import importlib.util

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
import zoo.deploy.export
import zoo.deploy.formats.ptq.tflite_denylist
import zoo.deploy.formats.saved_model
from zoo.deploy.export import ExportData
from zoo.training import ZooModel

HAS_OPENVINO = importlib.util.find_spec("openvino") is not None and importlib.util.find_spec("nncf") is not None


def _data(n=600, seed=0):
    """28x28 images whose top-left pixel is always 0 (as in MNIST); 4 classes told apart by the quadrant means."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 28, 28, 1), dtype=np.float32) * 0.5
    y = rng.integers(0, 4, n).astype("int32")
    for c in range(4):
        r, col = divmod(c, 2)
        x[y == c, 14 * r : 14 * r + 14, 14 * col : 14 * col + 14] += 0.5
    x[:, 0, 0, 0] = 0.0
    return x, y


def _trained(name="convnet_bn", **overrides):
    keras.utils.set_random_seed(0)
    model = zoo.build(name, input_shape=(28, 28, 1), num_classes=4, **overrides)
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=False)
    x, y = _data()
    model.fit(x, y, batch_size=32, epochs=2, verbose=0)
    return model


@pytest.fixture(scope="module")
def cnn():
    return _trained("convnet_bn", filters=(4, 8))


def _onnx_run(path, x):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_onnx_float16_and_int8_verify_and_hold_their_precision(cnn, tmp_path):
    import onnx

    x, y = _data(200, seed=1)
    report = zoo.deploy.export.export(cnn, tmp_path, ["onnx"], precision="float32,float16,int8",
                               data=ExportData(calibration=x, test=(x, y)), latency_runs=0, isolate=False)
    assert report.ok, report.table()
    keras_out = cnn.predict(x, verbose=0)
    for r in report.results:
        model = onnx.load(r.path)
        types = {init.data_type for init in model.graph.initializer}
        ops = {n.op_type for n in model.graph.node}
        got = _onnx_run(r.path, x)
        if r.variant == "float16":
            assert onnx.TensorProto.FLOAT16 in types and np.max(np.abs(got - keras_out)) <= 1e-2
        elif r.variant == "int8":  # QDQ: int8 weights, uint8 activations, dequantized around the float ops
            assert {"QuantizeLinear", "DequantizeLinear"} <= ops and onnx.TensorProto.INT8 in types
            assert np.mean(got.argmax(-1) == keras_out.argmax(-1)) >= 0.99
        else:
            assert np.max(np.abs(got - keras_out)) <= 1e-4
    assert report.result("onnx", "int8").size_bytes < report.result("onnx", "float32").size_bytes


def test_qat_model_exports_an_onnx_qdq_model_with_its_learned_ranges(tmp_path):
    from zoo.training import features as F

    x, y = _data()
    qat = F.QuantizationAware()
    model = qat.prepare_model(_trained("convnet_bn", filters=(4, 8)))
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", jit_compile=False, features=[qat])
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    report = zoo.deploy.export.export(model, tmp_path, ["onnx"], precision="int8", data=ExportData(test=(x[:200], y[:200])),
                               latency_runs=0, isolate=False)  # no representative data: the ranges are learned
    assert report.ok, report.table()
    import onnx

    graph = onnx.load(report.result("onnx", "int8").path).graph
    consts = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    quantize = [n for n in graph.node if n.op_type == "QuantizeLinear"]
    # The input's quantizer carries the range the model learned (QAT), not one calibrated here.
    learned = model.get_layer("image_quant")
    first = quantize[0]  # on the input, or on its NHWC->NCHW reshape
    lo, hi = float(learned.minimum.numpy()), float(learned.maximum.numpy())
    assert float(consts[first.input[1]]) == pytest.approx((max(hi, 0) - min(lo, 0)) / 255, rel=1e-5)
    assert np.mean(_onnx_run(report.result("onnx", "int8").path, x[:200]).argmax(-1)
                   == model.predict(x[:200], verbose=0).argmax(-1)) >= 0.99


@pytest.mark.skipif(not HAS_OPENVINO, reason="openvino/nncf not installed (pip install 'zoo[openvino]')")
def test_openvino_float32_verifies_in_openvino_runtime(cnn, tmp_path):
    import openvino as ov

    x, y = _data(200, seed=2)
    report = zoo.deploy.export.export(cnn, tmp_path, ["openvino"], data=ExportData(test=(x, y)), latency_runs=3, isolate=False)
    assert report.ok, report.table()
    (r,) = report.results
    assert r.verification.max_abs_diff <= 1e-4 and r.verification.latency_ms > 0
    compiled = ov.Core().compile_model(f"{r.path}/model.xml", "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled(x)[compiled.output("predictions")]
    np.testing.assert_allclose(got, cnn.predict(x, verbose=0), atol=1e-4)


# Runtimes whose accuracy budget needs no extra package (TFLite: the converter's own quantizer,
# zoo.deploy.formats.ptq.tflite_denylist); OpenVINO's needs nncf.
BUDGET_RUNTIMES = ["tflite", "onnx"]


def _sensitive_mlp():
    """An MLP whose first layer is ruined by int8 on purpose: one weight per unit, on the always-zero
    top-left pixel, is 1000. Float outputs do not change (that input is 0), but each unit's per-channel
    int8 scale becomes 1000/127, so every other weight rounds to 0."""
    model = _trained("mlp", width=32, depth=2, dropout=0.0)
    kernel, bias = model.get_layer("block1_dense").get_weights()
    kernel[0, :] = 1000.0
    model.get_layer("block1_dense").set_weights([kernel, bias])
    return model


@pytest.mark.parametrize("runtime", [*BUDGET_RUNTIMES, pytest.param(
    "openvino", marks=pytest.mark.skipif(not HAS_OPENVINO, reason="openvino/nncf not installed"))])
def test_accuracy_budget_keeps_the_layer_made_sensitive_in_float(runtime, tmp_path):
    model = _sensitive_mlp()
    x, y = _data(400, seed=3)
    val = _data(400, seed=4)
    report = zoo.deploy.export.export(model, tmp_path, [runtime], precision="int8",
                               data=ExportData(calibration=x[:100], validation=val, test=(x, y)), max_accuracy_drop=1.0,
                               latency_runs=0,
                               isolate=False)
    assert report.ok, report.table()
    details = report.result(runtime, "int8").details
    assert details["full_int8_drop"] > 20  # every layer int8: the ruined layer drops accuracy to chance
    assert details["float_layers"] == ["block1_dense"]  # the most sensitive, and enough
    if runtime != "openvino":  # NNCF's accuracy control ranks the layers itself and does not report the ranking
        assert max(details["sensitivity_points"], key=details["sensitivity_points"].get) == "block1_dense"
    assert details["within_budget"] and details["final_drop"] <= 1.0
    assert set(details["size_bytes"]) == set(details["latency_ms"]) == {"float32", "int8", "chosen"}
    assert details["size_bytes"]["int8"] < details["size_bytes"]["chosen"]  # the cost of the float layer


def _litert_agreement(path, x, reference) -> float:
    """Top-1 agreement of a .tflite model with `reference` outputs, run in LiteRT's own interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(path)).get_signature_runner("serving_default")
    (name,) = runner.get_input_details()
    out = np.concatenate([next(iter(runner(**{name: x[i : i + 1]}).values())) for i in range(len(x))])
    return float(np.mean(out.argmax(-1) == reference.argmax(-1)))


def test_agreement_guard_needs_no_labels_and_its_tflite_agrees_in_the_runtime(tmp_path):
    """On the architecture nested in an outer model, as `zoo train --data` makes it (the input's preprocessing,
    then the architecture): the guard searches the nested model's layers."""
    inner = _sensitive_mlp()
    image = keras.Input((28, 28, 1), name="image")
    model = keras.Model(image, inner(keras.layers.Identity(name="preprocess")(image)), name="trained_on_data")
    x, y = _data(300, seed=3)
    validation_inputs = _data(300, seed=4)[0]  # no labels
    report = zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="int8",
                               data=ExportData(calibration=x[:100], validation=validation_inputs, test=(x, y)),
                               min_agreement=97, latency_runs=0,
                               isolate=False)
    result = report.result("tflite", "int8")
    details = result.details
    assert details["metric"] == "agreement" and details["full_int8_agreement"] < 0.8  # the ruined layer: near chance
    assert details["float_layers"] == ["block1_dense"]  # the most sensitive, and enough
    low, _ = details["final_agreement_interval"]  # the guard holds the 95% lower bound to the minimum
    assert low >= 0.97 and details["within_budget"] and details["final_agreement"] >= 0.99
    fresh = _data(300, seed=5)[0]  # neither searched on nor verified on
    assert _litert_agreement(result.path, fresh, model.predict(fresh, verbose=0)) >= 0.99
    assert report.ok and result.verification.argmax_agreement >= 0.99


def test_the_softmax_writing_the_output_can_stay_float_in_tflite(tmp_path):
    """The op writing a model output is named after the signature (`StatefulPartitionedCall_1:0`), not its layer;
    int8's fixed 1/256 softmax step ties close classes, so the guard must be able to keep it float."""
    from ai_edge_litert.interpreter import Interpreter

    from zoo.deploy.formats.ptq.tflite_denylist import DenylistQuantizer
    from zoo.deploy.formats.saved_model import export_saved_model

    model = _trained("mlp", width=16, depth=1, dropout=0.0)
    export_saved_model(model, tmp_path / "sm")
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm"))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    x = _data(20)[0]
    converter.representative_dataset = lambda: ([x[i : i + 1]] for i in range(len(x)))
    quantizer = DenylistQuantizer(converter, output_layers=["predictions"])

    def softmax_dtype(flatbuffer):
        interpreter = Interpreter(model_content=flatbuffer)
        dtypes = {t["index"]: t["dtype"] for t in interpreter.get_tensor_details()}
        (op,) = [op for op in interpreter._get_ops_details() if op["op_name"] == "SOFTMAX"]
        return dtypes[op["outputs"][0]]

    assert softmax_dtype(quantizer.quantize()) == np.int8
    assert softmax_dtype(quantizer.quantize(exclude=["predictions"])) == np.float32


def _outlier_residual_model():
    """dense -> add(dense, constant outlier channel) -> classifier: the add's int8 range is the outlier's.

    Channel 0 of the residual branch is a constant 10^4 that the classifier ignores, so the float model is the
    trained one; per-tensor int8 of the add's output (and the classifier's input) then spends its 256 steps on
    0..10^4 and rounds every informative value to 0. Keeping the dense layers float does not help: only the add
    and the layer reading it hold the range.
    """
    keras.utils.set_random_seed(0)
    inputs = keras.Input((28, 28, 1), name="image")
    flat = keras.layers.Flatten(name="flatten")(inputs)
    hidden = keras.layers.Dense(16, activation="relu", name="hidden")(flat)
    branch = keras.layers.Dense(16, name="branch", kernel_initializer="zeros")(flat)
    stream = keras.layers.Add(name="residual_add")([hidden, branch])
    outputs = keras.layers.Dense(4, activation="softmax", name="classifier")(stream)
    model = ZooModel(inputs, outputs, name="outlier_residual")
    model.get_layer("branch").trainable = False
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=False)
    x, y = _data()
    model.fit(x, y, batch_size=32, epochs=3, verbose=0)
    kernel, bias = model.get_layer("branch").get_weights()
    bias[0] = 1e4
    model.get_layer("branch").set_weights([kernel, bias])
    kernel, bias = model.get_layer("classifier").get_weights()
    kernel[0, :] = 0.0
    model.get_layer("classifier").set_weights([kernel, bias])
    return model


@pytest.mark.parametrize("runtime", BUDGET_RUNTIMES)
def test_accuracy_budget_can_keep_a_residual_add_float(runtime, tmp_path):
    model = _outlier_residual_model()
    x, y = _data(400, seed=3)
    val = _data(400, seed=4)
    float_accuracy = float(np.mean(np.argmax(model.predict(val[0], verbose=0), -1) == val[1]))
    assert float_accuracy > 0.9  # the outlier channel leaves the float model as trained
    report = zoo.deploy.export.export(model, tmp_path, [runtime], precision="int8",
                               data=ExportData(calibration=x[:100], validation=val, test=(x, y)), max_accuracy_drop=1.0,
                               latency_runs=0,
                               isolate=False)
    details = report.result(runtime, "int8").details
    assert details["full_int8_drop"] > 20, details  # every layer int8: the add's range ruins the stream
    assert "residual_add" in details["sensitivity_points"]  # a candidate, though it has no weights
    assert "residual_add" in details["float_layers"]
    assert details["within_budget"] and details["final_drop"] <= 1.0, details


def test_a_layer_kept_float_in_onnx_keeps_its_activation_float(tmp_path):
    """swish is Sigmoid and Mul in ONNX, and onnxruntime's quantizer gives Sigmoid int8 outputs too (steps of
    1/255): keeping the layer float must keep both. The search once kept only its Mul: EfficientNetB0 with all 158
    layers kept float still agreed with float on 98.5% (the compatibility matrix's ONNX remedy)."""
    import onnx

    from zoo.deploy.formats import onnx as onnx_format
    from zoo.deploy.formats.ptq import budget, onnx_static

    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Conv2D(4, 3, activation="swish", name="conv")(inputs)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(keras.layers.Activation("sigmoid", name="gate")(x))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax", name="predictions")(x))
    report = zoo.deploy.export.export(model, tmp_path, ["onnx"], precision="float32", latency_runs=0, isolate=False)
    prepared = onnx_static.preprocess(report.result("onnx", "float32").path, tmp_path / "prepared.onnx")
    nodes = onnx_format.layer_nodes(prepared, budget.quantizable_layers(model))
    kept = [n for layer_nodes in nodes.values() for n in layer_nodes]
    sigmoids = [n for n in onnx.load(prepared).graph.node if n.op_type == "Sigmoid"]
    assert len(sigmoids) == 2 and {n.name for n in sigmoids} <= set(kept), nodes
    calibration = np.random.default_rng(0).random((16, 8, 8, 3), dtype=np.float32)
    graph = onnx.load(onnx_static.quantize_int8(prepared, tmp_path / "int8.onnx", calibration, exclude=kept)).graph
    quantized = {n.input[0] for n in graph.node if n.op_type == "QuantizeLinear"}
    assert not quantized & {out for n in graph.node if n.op_type == "Sigmoid" for out in n.output}


@keras.saving.register_keras_serializable(package="zoo_test")
class Determinant(keras.layers.Layer):
    """det of a 2x2 view of the input: TensorFlow's MatrixDeterminant, which has no TFLite builtin."""

    def call(self, x):
        return tf.expand_dims(tf.linalg.det(tf.reshape(x, (-1, 2, 2))), -1)


def _flex_model():
    inputs = keras.Input((4,), name="features")
    outputs = keras.layers.Dense(2, activation="softmax", name="predictions")(Determinant(name="det")(inputs))
    return ZooModel(inputs, outputs, name="det_model")


def test_flex_stays_off_unless_allowed_and_the_report_names_the_op(tmp_path):
    model = _flex_model()
    x = np.random.default_rng(5).random((16, 4), dtype=np.float32)
    report = zoo.deploy.export.export(model, tmp_path / "off", ["tflite"], data=ExportData(test=x), latency_runs=0,
                               isolate=False)
    (r,) = report.results
    assert r.status == "export_failed" and "MatrixDeterminant" in r.error and "--allow-flex" in r.error
    report = zoo.deploy.export.export(model, tmp_path / "on", ["tflite"], allow_flex=True, data=ExportData(test=x),
                               latency_runs=0,
                               isolate=False)
    (r,) = report.results
    # Exported as asked; no Python runtime here links the Flex delegate, so it is reported as not verified.
    assert r.status == "exported" and report.ok, report.table()
    assert r.details["flex_ops"] == ["MatrixDeterminant"]
    assert any("Flex" in n and "MatrixDeterminant" in n for n in r.notes)
    assert any(n.startswith("not verified: it runs Flex") for n in r.notes)
