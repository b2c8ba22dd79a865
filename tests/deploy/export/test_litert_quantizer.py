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
