"""tensorflow_serving/model_servers/tensorflow_model_server_test.py, the cases that need no TF Serving binary
feature zoo lacks (batching files, model config reloads, TF Lite, profiler and Prometheus are others'):
the model is `default` at version 123 (`saved_model_half_plus_two_cpu`; `..._tf2_cpu` is
`half_plus_two_tf2`), over real gRPC and real HTTP. `VerifyPredictRequest` and `_VerifyModelSpec` are
`test_util/tensorflow_model_server_test_base.py`'s.
"""

import pytest
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    predict_pb2,
    regression_pb2,
)

from tests.deploy.serve.conformance.test_http_rest_api_handler import EXPECTED_SIGNATURES

VERSION = 123
TF1, TF2 = "default", "half_plus_two_tf2"


def _verify_model_spec(spec, name, signature_name, version=VERSION):
    assert (spec.name, spec.signature_name, spec.version.value) == (name, signature_name, version)


def test_get_model_status(model_stub):  # tensorflow_model_server_test.py::testGetModelStatus
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "default"
    result = model_stub.GetModelStatus(request, timeout=30)
    assert len(result.model_version_status) == 1
    assert result.model_version_status[0].version == 123 and result.model_version_status[0].status.error_code == 0


def test_get_model_metadata(stub):  # tensorflow_model_server_test.py::testGetModelMetadata
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = "default"
    request.metadata_field.append("signature_def")
    result = stub.GetModelMetadata(request, timeout=30)
    assert result.model_spec.name == "default" and result.model_spec.version.value == VERSION
    assert len(result.metadata) == 1 and "signature_def" in result.metadata


@pytest.mark.parametrize("model", [pytest.param(TF1, id="tensorflow_model_server_test.py::testClassify"),
                                   pytest.param(TF2, id="tensorflow_model_server_test.py::testClassifyTf2")])
def test_classify(stub, model):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = "classify_x_to_y"
    request.input.example_list.examples.add().features.feature["x"].float_list.value.extend([2.0])
    result = stub.Classify(request, timeout=30)
    assert len(result.result.classifications) == 1 and len(result.result.classifications[0].classes) == 1
    assert result.result.classifications[0].classes[0].score == 3.0
    _verify_model_spec(result.model_spec, model, "classify_x_to_y")


@pytest.mark.parametrize("model", [pytest.param(TF1, id="tensorflow_model_server_test.py::testRegress"),
                                   pytest.param(TF2, id="tensorflow_model_server_test.py::testRegressTf2")])
def test_regress(stub, model):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = "regress_x_to_y"
    request.input.example_list.examples.add().features.feature["x"].float_list.value.extend([2.0])
    result = stub.Regress(request, timeout=30)
    assert len(result.result.regressions) == 1 and result.result.regressions[0].value == 3.0
    _verify_model_spec(result.model_spec, model, "regress_x_to_y")


@pytest.mark.parametrize("model", [pytest.param(TF1, id="tensorflow_model_server_test.py::testMultiInference"),
                                   pytest.param(TF2, id="tensorflow_model_server_test.py::testMultiInferenceTf2")])
def test_multi_inference(stub, model):
    request = inference_pb2.MultiInferenceRequest()
    for signature, method in (("regress_x_to_y", "tensorflow/serving/regress"),
                              ("classify_x_to_y", "tensorflow/serving/classify")):
        task = request.tasks.add()
        task.model_spec.name, task.model_spec.signature_name, task.method_name = model, signature, method
    request.input.example_list.examples.add().features.feature["x"].float_list.value.extend([2.0])
    result = stub.MultiInference(request, timeout=30)
    assert len(result.results) == 2
    assert result.results[0].regression_result.regressions[0].value == 3.0
    assert result.results[1].classification_result.classifications[0].classes[0].score == 3.0
    for i in range(2):
        _verify_model_spec(result.results[i].model_spec, model, request.tasks[i].model_spec.signature_name)


@pytest.mark.parametrize("specify_output, batch_input", [(True, False), (False, False), (True, True)])
def test_predict_saved_model(stub, specify_output, batch_input):
    """tensorflow_model_server_test.py::testPredictSavedModel (and testGoodModelConfig's specify_output=False;
    batch_input as the batching tests send it): VerifyPredictRequest."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "default"
    request.model_spec.signature_name = "serving_default"
    request.inputs["x"].dtype = types_pb2.DT_FLOAT
    request.inputs["x"].float_val.append(2.0)
    request.inputs["x"].tensor_shape.dim.add().size = 1
    if batch_input:
        request.inputs["x"].tensor_shape.dim.add().size = 1
    if specify_output:
        request.output_filter.append("y")
    result = stub.Predict(request, timeout=30)
    assert "y" in result.outputs and result.outputs["y"].dtype == types_pb2.DT_FLOAT
    assert tf.make_ndarray(result.outputs["y"]).ravel().tolist() == [3.0]
    _verify_model_spec(result.model_spec, "default", "serving_default")


@pytest.mark.parametrize("path, body, expected", [
    pytest.param("default:classify", {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]},
                 {"results": [[["", 3.0]]]}, id="tensorflow_model_server_test.py::testClassifyREST"),
    pytest.param("default:regress", {"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]},
                 {"results": [3.0]}, id="tensorflow_model_server_test.py::testRegressREST"),
    pytest.param("default:predict", {"instances": [2.0, 3.0, 4.0]}, {"predictions": [3.0, 3.5, 4.0]},
                 id="tensorflow_model_server_test.py::testPredictREST"),
    pytest.param("default:predict", {"inputs": [2.0, 3.0, 4.0]}, {"outputs": [3.0, 3.5, 4.0]},
                 id="tensorflow_model_server_test.py::testPredictColumnarREST"),
])
def test_rest(http, path, body, expected):
    r = http.post(f"/v1/models/{path}", json=body)
    assert r.status_code == 200 and r.json() == expected


def test_get_status_rest(http):  # tensorflow_model_server_test.py::testGetStatusREST
    assert http.get("/v1/models/default").json() == {"model_version_status": [{
        "version": "123", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}


def test_get_model_metadata_rest(http):
    """tensorflow_model_server_test.py::testGetModelMetadataREST: compared with the test's
    half_plus_two_model_metadata.json by signature, method, keys and dtypes (as in the handler test)."""
    body = http.get("/v1/models/default/metadata").json()
    assert body["model_spec"] == {"name": "default", "signature_name": "", "version": "123"}
    signatures = body["metadata"]["signature_def"]["signature_def"]
    assert {k: s["method_name"] for k, s in signatures.items()} == {k: v[0] for k, v in EXPECTED_SIGNATURES.items()}


def test_regress_missing_feature_rest(http):
    """testRegressREST without the `x` feature (saved_model_half_plus_two.py: FixedLenFeature without a default):
    TF Serving answers the session's error, the ParseExample op's message, INVALID_ARGUMENT."""
    r = http.post("/v1/models/default:regress", json={"signature_name": "regress_x_to_y", "examples": [{"x2": 1.0}]})
    assert r.status_code == 400 and "Feature: x (data type: float) is required but could not be found." in r.json()["error"]
    assert "Graph execution error" not in r.json()["error"]
