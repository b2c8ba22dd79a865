"""The server's limits: every bad request is a 4xx with a JSON error body (REST) or a client status code
(gRPC), load is shed instead of queued forever, deadlines hold, a version swap under 32 clients loses
nothing, and a short fuzz run finds no server error. Tiny servables (benchmarks.serving_models):
`scale` answers `x * version`, so every answer names the version that computed it.
"""

import json
import logging
import threading
import time

import grpc
import httpx
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from benchmarks import serving_fuzz, serving_swap
from benchmarks.serving_models import publish_count, publish_scale, publish_text
from zoo.deploy.serve import Server, prune
from zoo.deploy.serve.grpc_service import WARNINGS_KEY
from zoo.deploy.serve.limits import Limits
from zoo.deploy.serve.openapi import openapi_spec
from zoo.deploy.serve.server import is_loopback

MAX_REQUEST_BYTES = 1 << 20


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    base = tmp_path_factory.mktemp("limits")
    publish_scale(base)
    publish_count(base)
    publish_text(base)
    return base


@pytest.fixture(scope="module")
def server(base):
    with Server(base, rest_port=0, grpc_port=0, poll_s=0, max_request_bytes=MAX_REQUEST_BYTES) as s:
        yield s


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(server.grpc_target) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _post(server, model, body: bytes):
    return httpx.post(f"{server.rest_url}/v1/models/{model}:predict", content=body, timeout=30,
                      headers={"content-type": "application/json"})


def _request(model, name, proto):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs[name].CopyFrom(proto)
    return request


def _assert_error(response, status, message):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and message in body["error"], body


# ---- strict types, as TF Serving's json_tensor.cc ----------------------------------------------------------

@pytest.mark.parametrize("model, instances, message", [
    ("scale", [[True, 1.0]], "JSON Value: true Type: True is not of expected type: float"),
    ("count", ["1", 2], 'JSON Value: "1" Type: String is not of expected type: int32'),
    ("count", [1.5, 2], "JSON Value: 1.5 Type: Number is not of expected type: int32"),
    ("count", [1.0, 2], "JSON Value: 1.0 Type: Number is not of expected type: int32"),
    ("count", [True, 2], "Type: True is not of expected type: int32"),
    ("count", [2**31, 2], "JSON Value: 2147483648 Type: Number is not of expected type: int32"),
    ("scale", [[1e308, 1.0]], "non-finite values"),  # float32 infinity, as TF Serving; refused by the limit
    ("scale", [[None, 1.0]], "JSON Value: null Type: Null"),
    ("text", [1, "a"], "JSON Value: 1 Type: Number is not of expected type: string"),
    ("text", [["a"], "b"], "Expecting shape [1] but got: []"),
    ("scale", [[1.0, 2.0], [3.0]], "Expecting tensor size: 2 but got: 1"),
])
def test_json_values_are_typed_as_strictly_as_tf_serving_types_them(server, model, instances, message):
    _assert_error(_post(server, model, json.dumps({"instances": instances}).encode()), 400, message)


def test_values_tf_serving_accepts_are_accepted(server):
    r = _post(server, "scale", b'{"instances": [[1, 2.5], [-0.0, 3.4028234663852886e38], [16777217, 1e-50]]}')
    assert r.status_code == 200  # numbers written as json_tensor.cc's WriteDecimal writes them
    assert r.text == '{"predictions":[[1.0,2.5],[-0.0,3.40282347e+38],[16777216.0,0.0]]}'
    assert _post(server, "count", b'{"instances": [1, -7]}').json() == {"predictions": [2, -6]}


# ---- non-finite values ---------------------------------------------------------------------------------------

def test_non_finite_inputs_are_refused_over_both_apis(server, stub):
    _assert_error(_post(server, "scale", b'{"instances": [[NaN, 1.0], [2.0, -Infinity]]}'), 400,
                  "holds 2 non-finite values (NaN or Infinity), the first at index [0, 0]")
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(_request("scale", "x", tf.make_tensor_proto(np.array([[1, np.inf]], np.float32))), timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "non-finite" in e.value.details()


def test_non_finite_outputs_are_reported_not_returned_silently(server, tmp_path):
    """3e38 is a finite float32: `scale` version 1 returns it as is, a version that doubles it overflows."""
    x = np.array([[3e38, 1.0]], np.float32)
    r = _post(server, "scale", json.dumps({"instances": x.tolist()}).encode())
    assert r.status_code == 200 and "warnings" not in r.json()
    publish_scale(tmp_path, 1, factor=2.0)
    with Server(tmp_path, rest_port=0, grpc_port=0, poll_s=0) as s:
        r = httpx.post(f"{s.rest_url}/v1/models/scale:predict", json={"instances": x.tolist()}, timeout=30)
        assert r.status_code == 200
        body = json.loads(r.text)  # Infinity as a bare token, as TF Serving writes it
        assert body["predictions"] == [[float("inf"), 2.0]]
        assert body["warnings"] == ["Output 'y' holds 1 non-finite values (NaN or Infinity) of 2: the model "
                                    "overflowed or divided by zero on these inputs."]
        with grpc.insecure_channel(s.grpc_target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            response, call = stub.Predict.with_call(_request("scale", "x", tf.make_tensor_proto(x)), timeout=30)
        assert np.isinf(tf.make_ndarray(response.outputs["y"])[0, 0])
        assert "Output 'y' holds 1 non-finite" in dict(call.trailing_metadata())[WARNINGS_KEY]


def test_the_server_can_be_told_to_accept_non_finite_inputs(base):
    with Server(base, rest_port=0, grpc_port=0, poll_s=0, models=["scale"], allow_non_finite_inputs=True) as s:
        r = httpx.post(f"{s.rest_url}/v1/models/scale:predict", content=b'{"instances": [[NaN, 1.0]]}', timeout=30)
        assert r.status_code == 200 and len(r.json()["warnings"]) == 1


# ---- size and nesting ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [33, 1000, 100_000])
def test_deep_json_nesting_is_a_400_not_a_recursion_error(server, depth):
    body = b'{"instances": ' + b"[" * depth + b"1" + b"]" * depth + b"}"
    _assert_error(_post(server, "scale", body), 400, f"JSON nesting depth {depth + 1} exceeds the limit of 32")


def test_brackets_inside_strings_do_not_count_as_nesting(server):
    body = json.dumps({"signature_name": "[" * 100, "instances": [[1.0, 2.0]]}).encode()
    _assert_error(_post(server, "scale", body), 400, 'Serving signature name: "' + "[" * 100)


def test_oversized_requests_are_413_and_resource_exhausted(server, stub):
    _assert_error(_post(server, "scale", b"[" + b"0," * MAX_REQUEST_BYTES + b"0]"), 413, "exceeds the limit")
    big = np.zeros((MAX_REQUEST_BYTES // 8 + 1, 2), np.float32)
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(_request("scale", "x", tf.make_tensor_proto(big)), timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_small_proto_that_would_decode_to_a_huge_tensor_is_refused(server, stub):
    proto = tf.make_tensor_proto(np.zeros((1, 2), np.float32))
    proto.tensor_shape.dim[0].size = 2**40  # TensorProto repeats the last value to fill the shape
    proto.ClearField("tensor_content")
    proto.float_val.append(0.0)
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(_request("scale", "x", proto), timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "decodes to" in e.value.details()


def test_a_malformed_proto_is_invalid_argument_not_internal(server):
    with grpc.insecure_channel(server.grpc_target) as channel:
        raw = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        with pytest.raises(grpc.RpcError) as e:
            raw(b"\xff\xff\xff\xff", timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "PredictRequest" in e.value.details()


def test_every_rest_error_has_a_json_body(server):
    for method, path in [("GET", "/"), ("DELETE", "/v1/models/scale"), ("GET", "/v1/models/scale/"),
                         ("POST", "/v1/models/scale:classify"), ("PUT", "/v1/openapi.json")]:
        r = httpx.request(method, f"{server.rest_url}{path}", timeout=30)
        assert 400 <= r.status_code < 500 and isinstance(r.json()["error"], str), (method, path, r.text)


def test_the_openapi_description_is_served_and_lists_every_error(server):
    spec = httpx.get(f"{server.rest_url}/v1/openapi.json", timeout=30).json()
    assert spec == json.loads(json.dumps(openapi_spec()))
    predict = spec["paths"]["/v1/models/{model_name}:predict"]["post"]["responses"]
    assert {"200", "400", "404", "413", "429", "504"} <= set(predict)


# ---- load shedding and deadlines --------------------------------------------------------------------------------

class _Gate:
    """Replaces the store's predict: each call waits until the test opens the gate."""

    def __init__(self, server):
        self.server, self.open, self.entered = server, threading.Event(), threading.Semaphore(0)
        self.predict = server.store.predict

    def __call__(self, *args, **kwargs):
        self.entered.release()
        self.open.wait(30)
        return self.predict(*args, **kwargs)


def _admitted(server) -> int:
    with server.admission._lock:
        return server.admission._admitted


def _wait_for(condition, timeout_s=30):
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.01)


def test_a_full_queue_sheds_load_with_429_and_resource_exhausted(base, monkeypatch):
    x = np.array([[1.0, 2.0]], np.float32)
    with Server(base, rest_port=0, grpc_port=0, poll_s=0, models=["scale"], max_concurrent_requests=1,
                max_queued_requests=1) as s:
        gate = _Gate(s)
        monkeypatch.setattr(s.store, "predict", gate)
        results = []
        first = threading.Thread(target=lambda: results.append(httpx.post(
            f"{s.rest_url}/v1/models/scale:predict", json={"instances": x.tolist()}, timeout=30)))
        first.start()
        assert gate.entered.acquire(timeout=30)  # running
        second = threading.Thread(target=lambda: results.append(httpx.post(
            f"{s.rest_url}/v1/models/scale:predict", json={"instances": x.tolist()}, timeout=30)))
        second.start()
        _wait_for(lambda: _admitted(s) == 2)  # queued
        _assert_error(httpx.post(f"{s.rest_url}/v1/models/scale:predict", json={"instances": x.tolist()},
                                 timeout=30), 429, "The server is at capacity")
        with grpc.insecure_channel(s.grpc_target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            with pytest.raises(grpc.RpcError) as e:
                stub.Predict(_request("scale", "x", tf.make_tensor_proto(x)), timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "at capacity" in e.value.details()
        gate.open.set()
        first.join()
        second.join()
        assert [r.status_code for r in results] == [200, 200]
        assert s.admission.shed == 2 and _admitted(s) == 0


def test_a_request_past_its_deadline_gets_504_and_deadline_exceeded(base, monkeypatch):
    x = np.array([[1.0, 2.0]], np.float32)
    with Server(base, rest_port=0, grpc_port=0, poll_s=0, models=["scale"], request_timeout_s=0.3) as s:
        gate = _Gate(s)
        monkeypatch.setattr(s.store, "predict", gate)
        _assert_error(httpx.post(f"{s.rest_url}/v1/models/scale:predict", json={"instances": x.tolist()},
                                 timeout=30), 504, "Deadline exceeded")
        with grpc.insecure_channel(s.grpc_target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            threading.Timer(1.0, gate.open.set).start()  # the run ends after the deadline
            with pytest.raises(grpc.RpcError) as e:
                stub.Predict(_request("scale", "x", tf.make_tensor_proto(x)), timeout=30)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        _wait_for(lambda: _admitted(s) == 0)  # the abandoned REST run gave its slot back
        monkeypatch.undo()
        assert httpx.post(f"{s.rest_url}/v1/models/scale:predict", json={"instances": x.tolist()},
                          timeout=30).status_code == 200


def test_limits_are_checked_and_unknown_server_arguments_suggest_names(base):
    with pytest.raises(ValueError, match="max_queued_requests must be an integer >= 0"):
        Limits(max_queued_requests=-1)
    with pytest.raises(ValueError, match="request_timeout_s must be a number > 0"):
        Limits(request_timeout_s=0)
    with pytest.raises(KeyError, match="Did you mean: max_json_depth"):
        Server(base, max_json_deep=3)


def test_binding_beyond_loopback_warns(base, caplog):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.7") and not is_loopback("example.org")
    with caplog.at_level(logging.WARNING, logger="zoo.serving"):
        with Server(base, host="0.0.0.0", rest_port=0, grpc_port=0, poll_s=0, models=["count"]):
            pass
    assert "reachable from other machines" in caplog.text


# ---- version swap under load -------------------------------------------------------------------------------------

def test_a_version_swap_under_32_clients_fails_nothing_and_mixes_no_versions(tmp_path):
    x = np.array([[1.5, -2.0]], np.float32)
    publish_scale(tmp_path, 1)
    expected = {1: x * 1.0, 2: x * 2.0}
    with Server(tmp_path, rest_port=0, grpc_port=0, poll_s=0.05) as s:
        result = serving_swap.swap(
            s.rest_url, s.grpc_target, "scale", "x", x, serving_swap.classifier(expected, 0.0),
            lambda: publish_scale(tmp_path, 2), lambda: prune(tmp_path / "scale", keep=1), clients=32,
            before_s=0.5, after_s=0.5)
        assert s.store.served() == {"scale": [2]}
    assert result["failed"] == 0, result["first_failures"]
    assert result["answers_from_neither_version"] == 0
    for protocol in ("rest", "grpc"):
        assert set(result["answers_by_version"][protocol]) == {"1", "2"}
    assert result["requests"] > 64 and result["new_version_answered"]


# ---- fuzz --------------------------------------------------------------------------------------------------------------

def test_a_short_fuzz_run_finds_no_server_error(server):
    result = serving_fuzz.fuzz(server.rest_url, server.grpc_target, n=200, seed=1)
    for part in (result["rest"]["generated"], result["rest"]["schemathesis"], result["grpc"]["generated"]):
        assert part["failures"] == 0, part["first_failures"]
        assert part["requests"] >= 50
    assert result["rest"]["generated"]["requests"] >= 200 and result["grpc"]["generated"]["requests"] >= 200
    assert result["valid_request_unchanged"] == {"rest": True, "grpc": True}
