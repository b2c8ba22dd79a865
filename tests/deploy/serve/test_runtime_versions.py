"""Beyond TF Serving: a version folder holding an ONNX model instead of a SavedModel answers the same
predict, status and metadata API (REST and gRPC), next to SavedModel versions of the same model."""

import threading

import grpc
import httpx
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from zoo.deploy.serve import Server

from .versioned import publish, publish_onnx, publish_openvino


def test_an_onnx_version_serves_the_same_api_as_a_savedmodel(tmp_path):
    publish(tmp_path / "m", 1)
    publish_onnx(tmp_path / "m", 2)
    config = tmp_path / "models.config"
    config.write_text(f'model_config_list {{ config {{ name: "m" base_path: "{tmp_path / "m"}" '
                      'model_platform: "tensorflow" model_version_policy { all {} } } }\n')
    with Server(None, rest_port=0, grpc_port=0, poll_s=0, config_file=config) as server:
        assert server.store.served() == {"m": [1, 2]}
        for path, expected in (("m", 2.0), ("m/versions/1", 1.0), ("m/versions/2", 2.0)):
            r = httpx.post(f"{server.rest_url}/v1/models/{path}:predict", json={"instances": [[5.0], [6.0]]})
            assert r.status_code == 200 and r.json() == {"predictions": [[expected], [expected]]}
        meta = httpx.get(f"{server.rest_url}/v1/models/m/versions/2/metadata").json()
        sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
        assert sig["method_name"] == "tensorflow/serving/predict"
        assert list(sig["inputs"]) == ["x"] and list(sig["outputs"]) == ["version"]
        bad = httpx.post(f"{server.rest_url}/v1/models/m:predict", json={"instances": [[1.0, 2.0]]})
        assert bad.status_code == 400  # the signature's shape [-1, 1] is checked as for a SavedModel
        with grpc.insecure_channel(server.grpc_target) as channel:
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "m"
            request.inputs["x"].CopyFrom(tf.make_tensor_proto([[3.0]]))
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=30)
        assert response.model_spec.version.value == 2
        assert tf.make_ndarray(response.outputs["version"]).tolist() == [[2.0]]


@pytest.mark.slow  # 4 s (OpenVINO's import and conversion); the ONNX case above is the default run's
def test_an_openvino_version_answers_concurrent_requests(tmp_path):
    """The serving benchmark found concurrent requests failing on one OpenVINO infer request."""
    pytest.importorskip("openvino")
    publish_openvino(tmp_path / "m", 3)
    with Server(tmp_path, rest_port=0, grpc_port=0, poll_s=0) as server:
        results = [None] * 8

        def call(i):
            with httpx.Client() as http:
                results[i] = [http.post(f"{server.rest_url}/v1/models/m:predict",
                                        json={"instances": [[float(i)]]}, timeout=30).json() for _ in range(5)]

        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(r == {"predictions": [[3.0]]} for rs in results for r in rs), results
