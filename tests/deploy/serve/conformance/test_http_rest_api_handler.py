"""tensorflow_serving/model_servers/http_rest_api_handler_test.cc, case by case, over real HTTP.

The test serves `saved_model_half_plus_two_2_versions` at version 123 with the label `Version_Label`; here
the same model is `default` (the name tensorflow_model_server_test.py gives it), at 123 with that label.
Every answer is compared with the test's expected JSON (`CompareJson`: parsed), status code (the
canonical code through http_server.cc's `ToHTTPStatusCode`) and `HasSubstr` text.
"""

import json

import pytest

from tests.deploy.serve.conformance.models import LABEL

SRC = "http_rest_api_handler_test.cc"
MODEL = "default"


def _error(response, status: int, substring: str):
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    message = response.json()["error"]
    assert substring in message, message


@pytest.mark.parametrize("method, path, substring", [
    ("GET", "/v1/foo", "Malformed request"),
    ("POST", "/v1/foo", "Malformed request"),
    ("GET", "/v1/models", "Missing model name"),
    ("GET", "/v1/models/debug/model_name", "Malformed request"),
    ("POST", "/v1/models", "Malformed request"),
    ("GET", "/v1/models/foo:predict", "Malformed request"),
    ("GET", "/v1/models/foo/version/50:predict", "Malformed request"),
    ("POST", "/v1/models/foo/version/50:regress", "Malformed request"),
    ("POST", "/v1/models/foo/versions/HELLO:regress", "Malformed request"),
    ("POST", f"/v1/models/foo/versions/{2**64 - 1}:regress", "Failed to convert version"),
    ("POST", "/v1/models/foo/metadata", "Malformed request"),
    ("POST", "/v1/models/foo/label/some_label:regress", "Malformed request"),
    ("POST", "/v1/models/foo/versions/50/labels/some_label:regress", "Malformed request"),
    ("POST", "/v1/models/foo/versions/some_label:regress", "Malformed request"),
], ids=lambda v: v if isinstance(v, str) and v.startswith("/") else None)
def test_unsupported_api_calls(http, method, path, substring):  # http_rest_api_handler_test.cc::UnsupportedApiCalls
    _error(http.request(method, path), 400, substring)


def test_path_regex(http):
    """http_rest_api_handler_test.cc::kPathRegex: /v1/models is the API's (400 above), /statuspage and /index
    are not (TF Serving's HTTP server answers 404 for paths outside the handler)."""
    assert http.get("/v1/models").status_code == 400
    assert http.get("/statuspage").status_code == 404 and http.get("/index").status_code == 404


@pytest.mark.parametrize("path", ["/v1/models/foo:predict", "/v1/models/foo/versions/50:predict",
                                  f"/v1/models/{MODEL}/versions/99:predict"])
def test_predict_model_name_version_errors(http, path):  # http_rest_api_handler_test.cc::PredictModelNameVersionErrors
    r = http.post(path, content=b'{ "instances": [1] }')
    assert r.status_code == 404, r.text


@pytest.mark.parametrize("path, body, substring", [
    (f"/v1/models/{MODEL}:predict", "", "JSON Parse error: The document is empty"),
    (f"/v1/models/{MODEL}:predict", "instances = [1, 2]", "JSON Parse error: Invalid value"),
    (f"/v1/models/{MODEL}:predict", '{ "instances": ["x", "y"] }', "not of expected type: float"),
    (f"/v1/models/{MODEL}/labels/Version_Nonexistent:predict", '{ "instances": ["x", "y"] }',
     "Unrecognized servable version label"),
    (f"/v1/models/{MODEL}:predict", '{ "signature_name": 100 }', "'signature_name' key must be a string value."),
], ids=lambda v: None)
def test_predict_request_errors(http, path, body, substring):  # http_rest_api_handler_test.cc::PredictRequestErrors
    _error(http.post(path, content=body.encode()), 400, substring)


@pytest.mark.parametrize("path, body, expected", [
    (f"/v1/models/{MODEL}:predict", '{"instances": [[1.0, 2.0], [3.0, 4.0]]}', {"predictions": [[2.5, 3.0], [3.5, 4.0]]}),
    (f"/v1/models/{MODEL}/versions/123:predict", '{"instances": [1.0, 2.0]}', {"predictions": [2.5, 3.0]}),
    (f"/v1/models/{MODEL}/labels/{LABEL}:predict", '{"instances": [1.0, 2.0]}', {"predictions": [2.5, 3.0]}),
    (f"/v1/models/{MODEL}/versions/123:predict", '{"signature_name": "serving_default", "instances": [3.0, 4.0]}',
     {"predictions": [3.5, 4.0]}),
    (f"/v1/models/{MODEL}/versions/123:predict", '{"signature_name": "serving_default", "inputs": [3.0, 4.0]}',
     {"outputs": [3.5, 4.0]}),
], ids=lambda v: None)
def test_predict(http, path, body, expected):  # http_rest_api_handler_test.cc::Predict
    r = http.post(path, content=body.encode())
    assert r.status_code == 200 and r.json() == expected
    assert r.headers["content-type"] == "application/json"


@pytest.mark.parametrize("path", [f"/v1/models/{MODEL}:regress", f"/v1/models/{MODEL}/versions/123:regress",
                                  f"/v1/models/{MODEL}/labels/{LABEL}:regress"])
def test_regress(http, path):  # http_rest_api_handler_test.cc::Regress
    r = http.post(path, content=b'{"signature_name": "regress_x_to_y", "examples": [ { "x": 80.0 } ] }')
    assert r.status_code == 200 and r.json() == {"results": [42]}
    assert r.headers["content-type"] == "application/json"


@pytest.mark.parametrize("path, x, expected", [
    (f"/v1/models/{MODEL}:classify", 20.0, {"results": [[["", 12]]]}),
    (f"/v1/models/{MODEL}/labels/{LABEL}:classify", 10.0, {"results": [[["", 7]]]}),
])
def test_classify(http, path, x, expected):  # http_rest_api_handler_test.cc::Classify
    body = json.dumps({"signature_name": "classify_x_to_y", "examples": [{"x": x}]})
    r = http.post(path, content=body.encode())
    assert r.status_code == 200 and r.json() == expected


STATUS = {"model_version_status": [{"version": "123", "state": "AVAILABLE",
                                    "status": {"error_code": "OK", "error_message": ""}}]}


@pytest.mark.parametrize("path", [f"/v1/models/{MODEL}", f"/v1/models/{MODEL}/versions/123",
                                  f"/v1/models/{MODEL}/labels/{LABEL}"])
def test_get_status(http, path):  # http_rest_api_handler_test.cc::GetStatus
    r = http.get(path)
    assert r.status_code == 200 and r.json() == STATUS
    assert r.headers["content-type"] == "application/json"


# testdata/saved_model_half_plus_two_2_versions_metadata.json, the signatures of the TF1 script: method names,
# input and output keys and dtypes. Tensor names and shapes are the graph's own (models.py says where they differ).
EXPECTED_SIGNATURES = {
    "regress_x2_to_y3": ("tensorflow/serving/regress", {"inputs": "DT_FLOAT"}, {"outputs": "DT_FLOAT"}),
    "serving_default": ("tensorflow/serving/predict", {"x": "DT_FLOAT"}, {"y": "DT_FLOAT"}),
    "classify_x_to_y": ("tensorflow/serving/classify", {"inputs": "DT_STRING"}, {"scores": "DT_FLOAT"}),
    "regress_x_to_y": ("tensorflow/serving/regress", {"inputs": "DT_STRING"}, {"outputs": "DT_FLOAT"}),
    "regress_x_to_y2": ("tensorflow/serving/regress", {"inputs": "DT_STRING"}, {"outputs": "DT_FLOAT"}),
}


def test_get_model_metadata(http):  # http_rest_api_handler_test.cc::GetModelMetadata
    r = http.get(f"/v1/models/{MODEL}/metadata")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["model_spec"] == {"name": MODEL, "signature_name": "", "version": "123"}
    assert list(body["metadata"]) == ["signature_def"] and list(body["metadata"]["signature_def"]) == ["signature_def"]
    signatures = body["metadata"]["signature_def"]["signature_def"]
    assert set(signatures) == set(EXPECTED_SIGNATURES)
    for key, (method, inputs, outputs) in EXPECTED_SIGNATURES.items():
        found = signatures[key]
        assert set(found) == {"inputs", "outputs", "method_name", "defaults"} and found["defaults"] == {}
        assert found["method_name"] == method
        assert {k: v["dtype"] for k, v in found["inputs"].items()} == inputs
        assert {k: v["dtype"] for k, v in found["outputs"].items()} == outputs
        for info in (*found["inputs"].values(), *found["outputs"].values()):
            assert set(info) == {"dtype", "tensor_shape", "name"}
            assert set(info["tensor_shape"]) == {"dim", "unknown_rank"}
            assert all(set(d) == {"size", "name"} and isinstance(d["size"], str) for d in info["tensor_shape"]["dim"])
    assert signatures["regress_x2_to_y3"]["inputs"]["inputs"] == {
        "dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}],
                                              "unknown_rank": False}, "name": "x2:0"}
