"""The Prometheus endpoint as TF Serving serves it (`model_servers/http_server.cc`,
`util/prometheus_exporter.cc`, `servables/tensorflow/util.cc`): only with a monitoring config that
enables it, at its path, TF Serving's metric names; the counts equal the requests sent."""

import httpx
import grpc
import pytest
import tensorflow as tf
from prometheus_client.parser import text_string_to_metric_families
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from zoo.deploy.serve import Server
from zoo.deploy.serve.monitoring import prometheus_name

from .versioned import publish


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    publish(root / "alpha", 1)
    publish(root / "beta", 2)
    return root


def _scrape(server, path="/monitoring/prometheus/metrics"):
    r = httpx.get(server.rest_url + path, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def test_metric_names_are_sanitized_as_the_exporter_does():
    # prometheus_exporter.cc: GetPrometheusMetricName replaces [^a-zA-Z0-9_] with ':'.
    assert prometheus_name("/tensorflow/serving/request_count") == ":tensorflow:serving:request_count"
    assert prometheus_name("9/x-y") == "_9:x:y"


def test_prometheus_counts_equal_the_requests_sent_per_model_and_api(base, tmp_path):
    config = tmp_path / "monitoring.config"
    config.write_text('prometheus_config { enable: true, path: "/monitoring/prometheus/metrics" }\n')
    with Server(base, rest_port=0, grpc_port=0, poll_s=0, monitoring=config) as server:
        for _ in range(5):
            assert httpx.post(f"{server.rest_url}/v1/models/alpha:predict", json={"instances": [[1.0]]}).status_code == 200
        for _ in range(2):
            assert httpx.post(f"{server.rest_url}/v1/models/beta:predict", json={"instances": [[1.0]]}).status_code == 200
        assert httpx.post(f"{server.rest_url}/v1/models/nope:predict", json={"instances": [[1.0]]}).status_code == 404
        assert httpx.get(f"{server.rest_url}/v1/models/alpha").status_code == 200
        with grpc.insecure_channel(server.grpc_target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "alpha"
            request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0]]))
            for _ in range(3):
                stub.Predict(request, timeout=30)
            request.model_spec.version.value = 7
            with pytest.raises(grpc.RpcError):
                stub.Predict(request, timeout=30)
        families = _scrape(server)

    counts = {(s.labels["model_name"], s.labels["status"]): s.value
              for s in families[":tensorflow:serving:request_count"].samples}
    # 5 REST + 3 gRPC predicts and one status GET of alpha; the version that does not exist is NOT_FOUND.
    assert counts == {("alpha", "OK"): 9, ("beta", "OK"): 2, ("nope", "NOT_FOUND"): 1, ("alpha", "NOT_FOUND"): 1}
    latency = {(s.labels["model_name"], s.labels["API"], s.labels["entrypoint"]): s.value
               for s in families[":tensorflow:serving:request_latency"].samples if s.name.endswith("_count")}
    assert latency == {("alpha", "predict", "REST"): 5, ("beta", "predict", "REST"): 2,
                       ("alpha", "", "REST"): 1, ("alpha", "Predict", "GRPC"): 3}
    loads = {s.labels["status"] for s in families[":tensorflow:cc:saved_model:load_attempt_count"].samples}
    assert loads == {"success"}
    available = {(s.labels["model_name"], s.labels["version"])
                 for s in families[":zoo:serving:model_version_available"].samples}
    assert available == {("alpha", "1"), ("beta", "2")}


def test_no_endpoint_without_a_monitoring_config_that_enables_it(base, tmp_path):
    off = tmp_path / "off.config"
    off.write_text("prometheus_config { enable: false }\n")
    for monitoring in (None, off):
        with Server(base, rest_port=0, grpc_port=0, poll_s=0, monitoring=monitoring) as server:
            assert httpx.get(server.rest_url + "/monitoring/prometheus/metrics").status_code == 404
    custom = tmp_path / "custom.config"
    custom.write_text('prometheus_config { enable: true path: "/metrics" }\n')
    with Server(base, rest_port=0, grpc_port=0, poll_s=0, monitoring=custom) as server:
        assert ":tensorflow:serving:request_count" in _scrape(server, "/metrics")
