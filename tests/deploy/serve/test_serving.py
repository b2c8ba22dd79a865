"""TF Serving artifacts and the local TF Serving-compatible server, loopback only, free ports.

Parity through the official gRPC stubs of tensorflow-serving-api and plain HTTP, warmup
records, models.config, version and label selection, new and removed versions while
serving, and TF Serving's errors for bad requests.
"""

import base64
import shutil
import threading
import time

import grpc
import httpx
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

import zoo
from zoo.cli import main
from zoo.deploy.export import ExportData
from zoo.deploy.formats.saved_model import publish_saved_model
from zoo.deploy.formats.saved_model import SERVING_SIGNATURE, input_specs
from zoo.deploy.serve import (
    Batcher,
    Client,
    Server,
    ServingError,
    docker_command,
    prune,
    read_config,
    read_warmup,
    versions,
    write_config,
)
from zoo.deploy.formats.tf_serving import WARMUP_FILE

MAX_REQUEST_BYTES = 1 << 20  # small, so the oversized-request tests stay cheap


def _model(seed):
    tf.keras.utils.set_random_seed(seed)
    return zoo.build("lenet5")


@pytest.fixture(scope="module")
def mnist(real_mnist_dir):
    import zoo.data

    x, y = next(iter(zoo.data.load("mnist", "test", batch_size=16, data_dir=real_mnist_dir)))
    return x.numpy(), y.numpy()


@pytest.fixture(scope="module")
def models():
    return _model(1), _model(2)


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory, models, mnist):
    """lenet5 versions 1 and 2 (different weights, warmup from real MNIST), a string model, a config."""
    base = tmp_path_factory.mktemp("saved_models")
    for model in models:
        publish_saved_model(model, base, "lenet5", warmup_data=mnist[0])
    _save_text_model(base / "text" / "1")
    write_config(base, labels={"lenet5": {"stable": 1, "canary": 2}})
    return base


def _save_text_model(path):
    """A DT_STRING model: `b64` inputs, and a `_bytes` output that the REST API returns as b64."""

    class Text(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"length": tf.strings.length(text), "upper_bytes": tf.strings.upper(text)}

    module = Text()
    tf.saved_model.save(module, str(path), signatures={SERVING_SIGNATURE: module.serve})


@pytest.fixture(scope="module")
def server(base_dir):
    with Server(base_dir, rest_port=0, grpc_port=0, poll_s=0, max_request_bytes=MAX_REQUEST_BYTES) as s:
        yield s


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(server.grpc_target) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _grpc_request(x, model="lenet5", version=None, label=None, input_name="image"):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    if version is not None:
        request.model_spec.version.value = version
    if label is not None:
        request.model_spec.version_label = label
    request.inputs[input_name].CopyFrom(tf.make_tensor_proto(x))
    return request


def _post(server, path, **kwargs):
    return httpx.post(f"{server.rest_url}/v1/models/{path}", timeout=30, **kwargs)


def _assert_still_serving(server, stub, x, expected):
    """After a bad request, both APIs still answer correctly."""
    r = _post(server, "lenet5:predict", json={"instances": x[:2].tolist()})
    assert r.status_code == 200
    np.testing.assert_allclose(r.json()["predictions"], expected[:2], atol=1e-6)
    out = tf.make_ndarray(stub.Predict(_grpc_request(x[:2]), timeout=30).outputs["predictions"])
    np.testing.assert_allclose(out, expected[:2], atol=1e-6)


# ---- artifacts ---------------------------------------------------------------------------------

def test_warmup_records_are_prediction_logs_of_real_samples_and_are_replayed(base_dir, server, mnist):
    logs = read_warmup(base_dir / "lenet5" / "2")
    assert len(logs) == 10
    first = logs[0].predict_log.request
    assert first.model_spec.signature_name == SERVING_SIGNATURE
    np.testing.assert_array_equal(tf.make_ndarray(first.inputs["image"]), mnist[0][:1])
    assert server.store.resolve("lenet5", 1).warmup_replayed == 10
    assert server.store.resolve("lenet5", 2).warmup_replayed == 10
    assert server.store.resolve("text").warmup_replayed == 0  # none written: no real samples given


def test_warmup_samples_of_a_multi_input_model_from_a_dataset():
    import keras

    from zoo.deploy.formats.tf_serving import model_samples, predict_requests

    a, b = keras.Input((3,), name="a"), keras.Input((2,), name="b")
    model = keras.Model([a, b], keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))
    xa, xb = np.arange(60, dtype="float64").reshape(20, 3), np.ones((20, 2))
    ds = tf.data.Dataset.from_tensor_slices(({"a": xa, "b": xb}, np.zeros(20))).batch(4)
    samples = model_samples(model, ds, 6)
    np.testing.assert_array_equal(samples["a"], xa[:6].astype("float32"))
    assert samples["b"].shape == (6, 2) and samples["b"].dtype == np.float32
    requests = predict_requests(samples, "two_inputs", num_records=6)
    assert len(requests) == 6 and set(requests[5].inputs) == {"a", "b"}
    np.testing.assert_array_equal(tf.make_ndarray(requests[5].inputs["a"]), xa[5:6])
    with pytest.raises(ValueError, match=r"inputs \['b'\] are missing"):
        model_samples(model, {"a": xa}, 6)


def test_models_config_parses_back_with_base_paths_policy_and_labels(base_dir):
    config = text_format.Parse((base_dir / "models.config").read_text(), model_server_config_pb2.ModelServerConfig())
    entries = {c.name: c for c in config.model_config_list.config}
    assert set(entries) == {"lenet5", "text"}
    assert entries["lenet5"].base_path == "/models/lenet5"
    assert entries["lenet5"].model_platform == "tensorflow"
    assert entries["lenet5"].model_version_policy.HasField("all")
    assert dict(entries["lenet5"].version_labels) == {"stable": 1, "canary": 2}
    latest = write_config(base_dir, ["lenet5"], path=base_dir.parent / "latest.config", policy="latest:2",
                          container_base=None)
    (entry,) = read_config(latest).model_config_list.config
    assert entry.model_version_policy.latest.num_versions == 2
    assert entry.base_path == str((base_dir / "lenet5").resolve())
    with pytest.raises(ValueError, match="only labels loaded versions"):
        write_config(base_dir, path=base_dir.parent / "x.config", labels={"lenet5": {"a": 1}}, policy="latest")
    with pytest.raises(ValueError, match="version 7, which is not published"):
        write_config(base_dir, path=base_dir.parent / "x.config", labels={"lenet5": {"a": 7}})


def test_cli_write_config_and_print_docker(base_dir, tmp_path, capsys):
    out = tmp_path / "models.config"
    assert main(["serve", str(base_dir), "--write-config", str(out), "--labels", "lenet5:prod=2",
                 "--models", "lenet5"]) == 0
    (entry,) = text_format.Parse(out.read_text(), model_server_config_pb2.ModelServerConfig()).model_config_list.config
    assert entry.name == "lenet5" and dict(entry.version_labels) == {"prod": 2}
    capsys.readouterr()
    assert main(["serve", str(base_dir), "--print-docker"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == docker_command(base_dir)
    assert printed.startswith("docker run --rm -p 8501:8501 -p 8500:8500 -v ")
    assert f"{base_dir.resolve()}:/models tensorflow/serving --model_config_file=/models/models.config" in printed


def test_cli_rejects_unknown_directory_model_and_bad_label(base_dir, tmp_path, capsys):
    assert main(["serve", str(tmp_path / "missing"), "--write-config"]) == 2
    assert "No published model" in capsys.readouterr().err
    assert main(["serve", str(base_dir), "--models", "lenet6", "--print-docker", "--write-config",
                 str(tmp_path / "c")]) == 2
    assert "Did you mean: lenet5" in capsys.readouterr().err
    assert main(["serve", str(base_dir), "--labels", "lenet5-stable", "--write-config", str(tmp_path / "c")]) == 2
    assert "MODEL:LABEL=VERSION" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_export_writes_warmup_only_from_real_test_data(tmp_path, models, mnist):
    model = models[0]
    zoo.deploy.export.export(model, tmp_path / "real", "saved_model", data=ExportData(test=mnist), verify=False, isolate=False)
    zoo.deploy.export.export(model, tmp_path / "random", "saved_model", verify=False, isolate=False)
    (real,) = (tmp_path / "real").glob("saved_model/lenet5/1")
    logs = read_warmup(real)
    assert len(logs) == 10
    np.testing.assert_array_equal(tf.make_ndarray(logs[3].predict_log.request.inputs["image"]), mnist[0][3:4])
    assert not (tmp_path / "random" / "saved_model" / "lenet5" / "1" / WARMUP_FILE).exists()


def test_training_publishes_with_warmup_from_the_test_split_and_serves_it(tmp_path, real_mnist_dir, mnist):
    from zoo.training import TrainConfig, train

    config = TrainConfig(model="mlp", epochs=1, batch_size=64, train_split="train[:256]", val_split=None,
                         test_split="test[:64]", export_dir=str(tmp_path / "saved_models"), out=str(tmp_path / "runs"),
                         data_dir=real_mnist_dir, verbose=0, model_overrides={"width": 16, "depth": 1})
    result = train(config)
    assert result.export_path == tmp_path / "saved_models" / "mlp" / "1"
    logs = read_warmup(result.export_path)
    assert len(logs) == 10
    ((name, tensor),) = logs[0].predict_log.request.inputs.items()
    assert name == input_specs(result.model)[0].name  # the signature's input name
    np.testing.assert_array_equal(tf.make_ndarray(tensor), mnist[0][:1])
    with Server(tmp_path / "saved_models", rest_port=0, grpc_port=0, poll_s=0) as server:
        assert server.store.resolve("mlp").warmup_replayed == 10
        out = Client(server.grpc_target).predict(mnist[0], model="mlp")["predictions"]
    np.testing.assert_allclose(out, result.model.predict(mnist[0], verbose=0), atol=1e-6)


# ---- parity, status, metadata --------------------------------------------------------------------

def test_official_grpc_stub_and_plain_http_match_model_predict(server, stub, models, mnist):
    x = mnist[0]
    expected = models[1].predict(x, verbose=0)  # the highest version by default
    response = stub.Predict(_grpc_request(x), timeout=30)
    assert response.model_spec.version.value == 2
    np.testing.assert_allclose(tf.make_ndarray(response.outputs["predictions"]), expected, atol=1e-6)
    rows = _post(server, "lenet5:predict", json={"instances": x.tolist()})
    assert rows.status_code == 200
    np.testing.assert_allclose(rows.json()["predictions"], expected, atol=1e-6)
    columns = _post(server, "lenet5:predict", json={"signature_name": SERVING_SIGNATURE,
                                                      "inputs": {"image": x.tolist()}})
    np.testing.assert_allclose(columns.json()["outputs"], expected, atol=1e-6)
    named_rows = _post(server, "lenet5:predict", json={"instances": [{"image": r} for r in x[:3].tolist()]})
    np.testing.assert_allclose(named_rows.json()["predictions"], expected[:3], atol=1e-6)


def test_zoo_client_over_rest_and_grpc(server, models, mnist):
    x = mnist[0][:5]
    for url in (server.rest_url, f"grpc://{server.grpc_target}", server.grpc_target):
        with Client(url) as client:
            out = client.predict(x, model="lenet5", version=1)
            np.testing.assert_allclose(out["predictions"], models[0].predict(x, verbose=0), atol=1e-6)
            status = client.status(model="lenet5")
            assert [s["version"] for s in status["model_version_status"]] == ["1", "2"]
            assert client.metadata(model="lenet5", label="stable")["model_spec"]["version"] == "1"
            with pytest.raises(ServingError) as e:
                client.predict(x, model="lenet6")
            assert e.value.code == "NOT_FOUND" and "lenet5" in e.value.message


def test_b64_strings_and_several_outputs(server):
    words = [b"conv", b"\xff\x00net"]
    body = {"instances": [{"b64": base64.b64encode(w).decode()} for w in words]}
    r = _post(server, "text:predict", json=body)
    assert r.status_code == 200
    assert r.json() == {"predictions": [
        {"length": 4, "upper_bytes": {"b64": base64.b64encode(b"CONV").decode()}},
        {"length": 5, "upper_bytes": {"b64": base64.b64encode(b"\xff\x00NET").decode()}},
    ]}
    cols = _post(server, "text:predict", json={"inputs": {"text": [{"b64": "YQ=="}]}}).json()
    assert cols == {"outputs": {"length": [1], "upper_bytes": [{"b64": "QQ=="}]}}
    out = Client(server.grpc_target).predict(np.array(words, dtype=object), model="text")
    assert out["length"].tolist() == [4, 5] and out["upper_bytes"].tolist() == [b"CONV", b"\xff\x00NET"]


def test_status_and_metadata_have_tf_servings_json_shape(server, stub):
    status = httpx.get(f"{server.rest_url}/v1/models/lenet5/versions/2").json()
    assert status == {"model_version_status": [
        {"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    by_label = httpx.get(f"{server.rest_url}/v1/models/lenet5/labels/stable").json()
    assert [s["version"] for s in by_label["model_version_status"]] == ["1"]
    meta = httpx.get(f"{server.rest_url}/v1/models/lenet5/metadata").json()
    assert meta["model_spec"] == {"name": "lenet5", "version": "2", "signature_name": ""}
    sig = meta["metadata"]["signature_def"]["signature_def"][SERVING_SIGNATURE]
    assert sig["inputs"]["image"]["dtype"] == "DT_FLOAT"
    assert [d["size"] for d in sig["inputs"]["image"]["tensor_shape"]["dim"]] == ["-1", "28", "28", "1"]
    assert sig["outputs"]["predictions"]["dtype"] == "DT_FLOAT"
    assert sig["method_name"] == "tensorflow/serving/predict"
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "lenet5"
    signatures = get_model_metadata_pb2.SignatureDefMap()
    stub.GetModelMetadata(request, timeout=30).metadata["signature_def"].Unpack(signatures)
    assert list(signatures.signature_def[SERVING_SIGNATURE].inputs) == ["image"]
    with grpc.insecure_channel(server.grpc_target) as channel:
        status_request = get_model_status_pb2.GetModelStatusRequest()
        status_request.model_spec.name = "lenet5"
        response = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(status_request, timeout=30)
    assert [(s.version, s.state) for s in response.model_version_status] == [
        (1, get_model_status_pb2.ModelVersionStatus.AVAILABLE), (2, get_model_status_pb2.ModelVersionStatus.AVAILABLE)]


def test_version_and_label_selection(server, stub, models, mnist):
    x = mnist[0][:4]
    v1, v2 = (m.predict(x, verbose=0) for m in models)
    assert not np.allclose(v1, v2, atol=1e-3)  # the versions are distinguishable
    for path, expected in (("lenet5", v2), ("lenet5/versions/1", v1), ("lenet5/versions/2", v2),
                           ("lenet5/labels/stable", v1), ("lenet5/labels/canary", v2)):
        r = _post(server, f"{path}:predict", json={"instances": x.tolist()})
        np.testing.assert_allclose(r.json()["predictions"], expected, atol=1e-6, err_msg=path)
    for kwargs, expected, version in (({"version": 1}, v1, 1), ({"label": "stable"}, v1, 1), ({}, v2, 2)):
        response = stub.Predict(_grpc_request(x, **kwargs), timeout=30)
        assert response.model_spec.version.value == version
        np.testing.assert_allclose(tf.make_ndarray(response.outputs["predictions"]), expected, atol=1e-6)


# ---- bad requests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path, body, status, message", [
    ("lenet5:predict", b'{"instances": [1, 2', 400, "JSON Parse error"),
    ("lenet5:predict", b'[1, 2]', 400, "Is not object"),
    ("lenet5:predict", b'{"instances": [[1]], "inputs": [[1]]}', 400, "expecting only one of 'inputs' or 'instances'"),
    ("lenet5:predict", b'{"inputs": {"pixels": [[1]]}}', 400, "Missing named input: image in 'inputs' object."),
    ("lenet5:predict", b'{"instances": [{"image": "zero"}]}', 400, "is not of expected type: float"),
    ("lenet5:predict", b'{"instances": [[1, 2, 3]]}', 400, "has shape [1, 3]"),
    ("lenet5:predict", b'{"instances": [[[1]], [[1], [2]]]}', 400, "Expecting tensor size: 1 but got: 2"),
    ("lenet6:predict", b'{"instances": [[1]]}', 404, "Servable not found for request: Latest(lenet6)"),
    ("lenet5/versions/9:predict", b'{"instances": [[1]]}', 404, "Specific(lenet5, 9)"),
    ("lenet5/labels/beta:predict", b'{"instances": [[1]]}', 400, "Unrecognized servable version label: beta"),
    ("lenet5:predict", b"[" + b"0," * MAX_REQUEST_BYTES + b"0]", 413, "exceeds the limit"),
    ("lenet5:explain", b"{}", 400, "Malformed request"),
    ("lenet5:predict", b'{"signature_name": "serve", "instances": [[1]]}', 400,
     'Serving signature name: "serve" not found'),
])
def test_bad_rest_requests_get_tf_serving_errors_and_the_server_keeps_serving(
        server, stub, models, mnist, path, body, status, message):
    r = _post(server, path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    assert set(r.json()) == {"error"} and message in r.json()["error"]
    _assert_still_serving(server, stub, mnist[0], models[1].predict(mnist[0], verbose=0))


def test_bad_rest_status_requests(server):
    r = httpx.get(f"{server.rest_url}/v2/health")
    assert r.status_code == 404 and r.json() == {"error": "Malformed request: GET /v2/health"}
    assert httpx.delete(f"{server.rest_url}/v1/models/lenet5").status_code == 400  # TF Serving: Malformed request
    assert httpx.get(f"{server.rest_url}/v1/models/lenet6").status_code == 404
    assert httpx.get(f"{server.rest_url}/v1/models/lenet5/versions/9").status_code == 404
    assert httpx.get(f"{server.rest_url}/v1/models/lenet6/metadata").json()["error"].startswith("Servable not found")


@pytest.mark.parametrize("kwargs, code, message", [
    ({"input_name": "pixels"}, grpc.StatusCode.INVALID_ARGUMENT, "unknown: ['pixels']"),
    ({"x": np.zeros((1, 28, 28, 1), np.int32)}, grpc.StatusCode.INVALID_ARGUMENT, "to be float32 but int32"),
    ({"x": np.zeros((1, 28, 28), np.float32)}, grpc.StatusCode.INVALID_ARGUMENT, "has shape [1, 28, 28]"),
    ({"model": "lenet6"}, grpc.StatusCode.NOT_FOUND, "Latest(lenet6)"),
    ({"version": 9}, grpc.StatusCode.NOT_FOUND, "Specific(lenet5, 9)"),
    ({"label": "beta"}, grpc.StatusCode.INVALID_ARGUMENT, "Unrecognized servable version label"),
    ({"x": np.zeros((MAX_REQUEST_BYTES // 3136 + 1, 28, 28, 1), np.float32)}, grpc.StatusCode.RESOURCE_EXHAUSTED,
     "larger than max"),
])
def test_bad_grpc_requests_get_tf_serving_status_codes_and_the_server_keeps_serving(
        server, stub, models, mnist, kwargs, code, message):
    x = kwargs.pop("x", mnist[0][:1])
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(_grpc_request(x, **kwargs), timeout=30)
    assert e.value.code() == code
    assert message in e.value.details()
    _assert_still_serving(server, stub, mnist[0], models[1].predict(mnist[0], verbose=0))


def test_an_unexpected_failure_is_internal_and_the_server_keeps_serving(server, stub, models, mnist, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("out of cheese")

    with monkeypatch.context() as patch:
        patch.setattr(server.store, "predict", broken)
        r = _post(server, "lenet5:predict", json={"instances": mnist[0][:1].tolist()})
        assert r.status_code == 500 and r.json() == {"error": "RuntimeError: out of cheese"}
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(_grpc_request(mnist[0][:1]), timeout=30)
        assert e.value.code() == grpc.StatusCode.INTERNAL and "out of cheese" in e.value.details()
    _assert_still_serving(server, stub, mnist[0], models[1].predict(mnist[0], verbose=0))


def test_malformed_protobuf_over_grpc_fails_that_call_only(server, stub, models, mnist):
    with grpc.insecure_channel(server.grpc_target) as channel:
        raw = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        with pytest.raises(grpc.RpcError) as e:
            raw(b"\xff\xff\xff\xff", timeout=30)
    assert e.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
    _assert_still_serving(server, stub, mnist[0], models[1].predict(mnist[0], verbose=0))


# ---- the model directory while serving ---------------------------------------------------------------

def test_a_new_version_is_picked_up_without_failures_and_a_removed_one_is_dropped(tmp_path, models, mnist):
    x = mnist[0][:4]
    v1, v2 = (m.predict(x, verbose=0) for m in models)
    publish_saved_model(models[0], tmp_path, "lenet5")
    failures, seen, stop = [], set(), threading.Event()

    def hammer(client):
        while not stop.is_set():
            try:
                out = client.predict(x, model="lenet5")["predictions"]
                seen.add(1 if np.allclose(out, v1, atol=1e-6) else 2 if np.allclose(out, v2, atol=1e-6) else -1)
            except Exception as e:  # noqa: BLE001 - any failure during the switch is the bug under test
                failures.append(repr(e))

    with Server(tmp_path, rest_port=0, grpc_port=0, poll_s=0.05) as server:
        clients = [Client(server.rest_url), Client(server.grpc_target)]
        threads = [threading.Thread(target=hammer, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        time.sleep(0.3)
        publish_saved_model(models[1], tmp_path, "lenet5")
        deadline = time.monotonic() + 30
        while 2 not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        prune(tmp_path / "lenet5", keep=1)  # version 1 disappears while requests run
        while server.store.served()["lenet5"] != [2] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join()
        assert failures == []
        assert seen == {1, 2}
        assert versions(tmp_path / "lenet5") == [2]
        assert server.store.served() == {"lenet5": [2]}
        with pytest.raises(ServingError) as e:
            clients[0].predict(x, model="lenet5", version=1)
        assert e.value.http_status == 404
        shutil.rmtree(tmp_path / "lenet5")
        while server.store.served() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ServingError) as e:
            clients[1].status(model="lenet5")
        assert e.value.code == "NOT_FOUND"


def test_a_corrupt_version_is_reported_and_the_others_keep_serving(tmp_path, models, mnist):
    # Published once version 1 serves: TF Serving's default policy (latest) aspires only version 2, and its
    # AvailabilityPreservingPolicy keeps 1 until 2 is AVAILABLE (core/availability_preserving_policy.cc).
    publish_saved_model(models[0], tmp_path, "lenet5")
    with Server(tmp_path, rest_port=0, grpc_port=0, poll_s=0) as server:
        broken = tmp_path / "lenet5" / "2"
        broken.mkdir()
        (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
        server.store.refresh()
        status = httpx.get(f"{server.rest_url}/v1/models/lenet5").json()["model_version_status"]
        assert [(s["version"], s["state"]) for s in status] == [("1", "AVAILABLE"), ("2", "END")]
        assert status[1]["status"]["error_code"] == "UNKNOWN" and status[1]["status"]["error_message"]
        out = Client(server.rest_url).predict(mnist[0][:2], model="lenet5")["predictions"]
        np.testing.assert_allclose(out, models[0].predict(mnist[0][:2], verbose=0), atol=1e-6)


def test_server_refuses_a_port_in_use(base_dir, server):
    with pytest.raises(OSError, match="Cannot bind REST"):
        Server(base_dir, rest_port=server.rest_port, grpc_port=0, poll_s=0).start()


# ---- batching ------------------------------------------------------------------------------------------

class _SlowServable:
    """Doubles its input after a delay, counting runs, so concurrent calls pile up."""

    def __init__(self):
        self.runs = 0

    def run(self, signature_name, inputs, output_filter=()):
        self.runs += 1
        time.sleep(0.05)
        return {"y": inputs["x"] * 2}


def test_batcher_joins_concurrent_requests_and_splits_the_answers():
    servable, batcher = _SlowServable(), Batcher(max_batch_size=64)
    results = {}

    def call(i):
        results[i] = batcher(servable, "", {"x": np.full((i % 3 + 1, 2), i, np.float32)})["y"]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(16):
        np.testing.assert_array_equal(results[i], np.full((i % 3 + 1, 2), 2 * i, np.float32))
    assert servable.runs < 16  # some requests shared a run
    assert sum(n * count for n, count in batcher.batch_sizes.items()) == 16


def test_batcher_runs_requests_alone_when_outputs_are_not_per_example():
    class Summing(_SlowServable):
        def run(self, signature_name, inputs, output_filter=()):
            super().run(signature_name, inputs, output_filter)
            return {"total": inputs["x"].sum(keepdims=True)[0]}  # one row, whatever the batch

    servable, batcher = Summing(), Batcher()
    results = {}

    def call(i):
        results[i] = batcher(servable, "", {"x": np.full((2, 1), i, np.float32)})["total"]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {i: r.tolist() for i, r in results.items()} == {i: [2.0 * i] for i in range(6)}
    assert max(batcher.batch_sizes) > 1  # a shared run was attempted, and its result not split


def test_batching_server_keeps_parity(base_dir, models, mnist):
    x = mnist[0]
    expected = models[1].predict(x, verbose=0)
    with Server(base_dir, rest_port=0, grpc_port=0, poll_s=0, batching=True) as server:
        outs = [None] * 8

        def call(i):
            outs[i] = Client(server.grpc_target if i % 2 else server.rest_url).predict(x[i:i + 2], model="lenet5")

        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, out in enumerate(outs):
            np.testing.assert_allclose(out["predictions"], expected[i:i + 2], atol=1e-6)
