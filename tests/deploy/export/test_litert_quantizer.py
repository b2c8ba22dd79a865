"""TFLite precisions from LiteRT's own quantizer (`zoo.deploy.formats.ptq.litert_quantizer`, issue 42): each
artifact run in LiteRT's own interpreter against Keras, its tensors read back from the interpreter."""

import importlib.util

import numpy as np
import pytest

import zoo.deploy.export
from zoo.deploy.export import ExportData
from tests.deploy.export.test_quantized_formats import _data, _litert_agreement, _sensitive_mlp, _trained

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ai_edge_quantizer") is None,
                                reason="ai-edge-quantizer not installed")


def _tensor_types(path) -> set:
    """The dtypes of the tensors the ops of a .tflite model compute (weights and activations), in LiteRT."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    return {np.dtype(t["dtype"]).name for t in interpreter.get_tensor_details()}


def test_full_int8_and_int16_activations_verify_in_litert(tmp_path):
    model = _trained("convnet_bn", filters=(4, 8))
    x, y = _data(200, seed=1)
    report = zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="a8w8,a16w8",
                                      data=ExportData(calibration=x[:100], test=(x, y)), latency_runs=0,
                                      isolate=False)
    assert report.ok, report.table()
    keras_out = model.predict(x, verbose=0)
    a8, a16 = report.result("tflite", "a8w8"), report.result("tflite", "a16w8")
    assert {"int8"} <= _tensor_types(a8.path) and "int16" not in _tensor_types(a8.path)
    assert {"int8", "int16"} <= _tensor_types(a16.path)  # int8 weights, int16 activations
    for r in (a8, a16):
        assert _litert_agreement(r.path, x, keras_out) >= 0.99


@pytest.mark.slow
def test_weight_only_int8_and_blockwise_int4_shrink_the_weights(tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    model = _trained("mlp", width=64, depth=2, dropout=0.0)  # 784 -> 64 -> 64 -> 4
    x, y = _data(200, seed=1)
    report = zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="float32,w8,w4",
                                      data=ExportData(test=(x, y)), latency_runs=0, isolate=False)
    assert report.ok, report.table()
    sizes = {r.variant: r.size_bytes for r in report.results}
    assert sizes["w8"] < sizes["float32"] / 3
    # blocks of 32 do not divide the first layer's 784 inputs: it stays float, the 64 x 64 layer is int4
    assert sizes["float32"] - sizes["w4"] > 64 * 64 * 4 * 0.8
    keras_out = model.predict(x, verbose=0)
    for variant in ("w8", "w4"):
        path = report.result("tflite", variant).path
        assert _litert_agreement(path, x, keras_out) >= 0.99
        assert "float32" in _tensor_types(path)  # activations stay float tensors (w4's kernels quantize them inside)


def _guarded_a8w8(model, tmp_path, min_agreement):
    """`model`'s a8w8 `.tflite` under the agreement guard, on the same calibration, validation and test data."""
    x, y = _data(400, seed=3)
    return zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="a8w8",
                                    data=ExportData(calibration=x[:100], validation=_data(400, seed=4)[0], test=(x, y)),
                                    min_agreement=min_agreement, latency_runs=0, isolate=False)


@pytest.mark.slow
def test_min_agreement_gives_an_activation_outlier_int16_not_float(tmp_path):
    """The residual add whose int8 range an outlier channel spends (`_outlier_residual_model`): int16
    activations for the layers holding that range meet the minimum, with nothing float."""
    from tests.deploy.export.test_quantized_formats import _outlier_residual_model

    model = _outlier_residual_model()
    report = _guarded_a8w8(model, tmp_path, min_agreement=99)
    result = report.result("tflite", "a8w8")
    details = result.details
    assert details["full_int8_agreement"] < 0.8, details  # the add's int8 range ruins the stream
    assert details["float_layers"] == [] and set(details["remedied_layers"].values()) == {"int16"}, details
    assert details["within_budget"], details
    fresh = _data(300, seed=5)[0]
    assert _litert_agreement(result.path, fresh, model.predict(fresh, verbose=0)) >= 0.99
    assert "int16" in _tensor_types(result.path)


@pytest.mark.slow
def test_min_agreement_keeps_a_layer_float_where_int16_activations_cannot_help(tmp_path):
    """A layer ruined by its int8 weights (`_sensitive_mlp`): int16 activations leave its weights int8, so the
    search gives every candidate int16 first, then keeps the ruined layer float."""
    model = _sensitive_mlp()
    report = _guarded_a8w8(model, tmp_path, min_agreement=97)
    details = report.result("tflite", "a8w8").details
    assert details["float_layers"] == ["block1_dense"], details
    assert details["within_budget"] and report.ok, report.table()


def test_constants_the_quantizer_stores_after_the_flatbuffer_survive_the_metadata_rewrite():
    """LiteRT's quantizer writes a model with 256 KB of constants or more with its buffers after the flatbuffer
    (offset and size); zoo's metadata rewrite packs the flatbuffer again, and must take them in."""
    import keras
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from zoo.deploy.formats.ptq import litert_quantizer
    from zoo.deploy.formats.tflite_file import TFLiteFile, _schema

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((512,)), keras.layers.Dense(640), keras.layers.Dense(4)])
    quantized = litert_quantizer.quantize(tf.lite.TFLiteConverter.from_keras_model(model).convert(), "w8")
    buffers = _schema().ModelT.InitFromObj(_schema().Model.GetRootAsModel(quantized, 0)).buffers
    assert any(b.offset > 1 for b in buffers)  # stored after the flatbuffer: the case this test is about
    rewritten = TFLiteFile(quantized).with_metadata({"zoo_metadata": b"{}"})
    x = np.random.default_rng(0).random((1, 512), np.float32)
    outputs = []
    for flatbuffer in (quantized, rewritten):
        runner = Interpreter(model_content=flatbuffer).get_signature_runner("serving_default")
        outputs.append(next(iter(runner(**{next(iter(runner.get_input_details())): x}).values())))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_allclose(outputs[1], model.predict(x, verbose=0), atol=0.05)
