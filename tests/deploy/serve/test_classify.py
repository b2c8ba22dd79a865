"""TF Serving's Classify API for an exported classifier (issue 13), through the official gRPC stub.

The classifier is exported with class names; its SavedModel then holds `assets/labels.txt` and a
`classify` signature (serialized tf.Examples in, `classes` and `scores` out). The scores are compared
with the Keras model's own predictions, the labels with the class names given at export.
"""

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2, prediction_service_pb2_grpc

import zoo.deploy.export
import zoo.deploy.formats
import zoo.deploy.formats.saved_model
import zoo.deploy.serve
from zoo.deploy.export import ExportData
from zoo.deploy.serve import Server

CLASSES = ["cat", "dog", "bird"]


def _classifier():
    keras.utils.set_random_seed(0)
    image = keras.Input((6, 6, 3), name="image")
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3, name="conv")(image))
    return keras.Model(image, keras.layers.Dense(3, activation="softmax", name="probs")(x), name="tiny")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("serving")
    model = _classifier()
    x = np.random.default_rng(0).normal(size=(8, 6, 6, 3)).astype("float32")
    report = zoo.deploy.export.export(model, base / "export", ["saved_model"], serving_dir=base / "models",
                               data=ExportData(test=x), latency_runs=0, isolate=False, class_names=CLASSES)
    assert report.ok, report.table()
    with Server(base / "models", rest_port=0, grpc_port=0, poll_s=0) as server:
        with grpc.insecure_channel(server.grpc_target) as channel:
            yield model, x, report, prediction_service_pb2_grpc.PredictionServiceStub(channel), server


def _example(image):
    return tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(float_list=tf.train.FloatList(value=np.asarray(image).ravel()))}))


def _request(signature_name="classify"):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "tiny"
    request.model_spec.signature_name = signature_name
    return request


def test_classify_returns_every_class_name_with_keras_scores(served):
    model, x, report, stub, _ = served
    request = _request()
    for image in x[:5]:
        request.input.example_list.examples.add().CopyFrom(_example(image))
    response = stub.Classify(request, timeout=30)
    expected = model.predict(x[:5], verbose=0)
    assert response.model_spec.signature_name == "classify" and len(response.result.classifications) == 5
    for row, scores in zip(response.result.classifications, expected):
        assert [c.label for c in row.classes] == CLASSES
        np.testing.assert_allclose([c.score for c in row.classes], scores, atol=1e-6)
    version = report.result("saved_model").path
    assert zoo.deploy.formats.saved_model.read_labels(version) == CLASSES  # assets/labels.txt, one class a line


def test_context_features_reach_every_example(served):
    model, x, _, stub, _ = served
    request = _request()
    request.input.example_list_with_context.context.CopyFrom(_example(x[0]))
    for _ in range(3):
        request.input.example_list_with_context.examples.add()  # no features of their own
    response = stub.Classify(request, timeout=30)
    expected = model.predict(x[:1], verbose=0)[0]
    for row in response.result.classifications:
        np.testing.assert_allclose([c.score for c in row.classes], expected, atol=1e-6)


def test_classify_errors_are_tf_servings(served):
    _, x, _, stub, _ = served
    request = _request(signature_name="")  # serving_default: a predict signature, as TF Serving would say
    request.input.example_list.examples.add().CopyFrom(_example(x[0]))
    with pytest.raises(grpc.RpcError) as info:
        stub.Classify(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "No classification inputs found in SignatureDef" in info.value.details()  # classifier.cc
    assert "signature 'classify' of this model is one" in info.value.details()
    empty = _request()
    empty.input.example_list.examples.add()  # no "image" feature
    with pytest.raises(grpc.RpcError) as info:
        stub.Classify(empty, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Example 0 has no feature 'image'" in info.value.details() and "108 values" in info.value.details()
    short = _request()
    short.input.example_list.examples.add().CopyFrom(_example(x[0][:2]))
    with pytest.raises(grpc.RpcError) as info:
        stub.Classify(short, timeout=30)
    assert "has 36 values; the model's input takes 108" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        stub.Classify(_request(), timeout=30)  # no input at all
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "Input is empty" in info.value.details()



def test_rest_classify_answers_as_tf_serving_with_the_same_scores(served):
    import httpx

    model, x, _, _, server = served
    url = f"{server.rest_url}/v1/models/tiny:classify"
    body = {"signature_name": "classify", "examples": [{"image": image.ravel().tolist()} for image in x[:3]]}
    r = httpx.post(url, json=body, timeout=30)
    assert r.status_code == 200, r.text
    expected = model.predict(x[:3], verbose=0)
    for row, scores in zip(r.json()["results"], expected):
        assert [label for label, _ in row] == CLASSES
        np.testing.assert_allclose([score for _, score in row], scores, atol=1e-6)
    context = {"signature_name": "classify", "context": {"image": x[0].ravel().tolist()}, "examples": [{}]}
    r = httpx.post(url, json=context, timeout=30)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose([s for _, s in r.json()["results"][0]], expected[0], atol=1e-6)
    pixels = {"signature_name": "classify", "examples": [{"image": np.round(x[0]).astype(int).ravel().tolist()}]}
    r = httpx.post(url, json=pixels, timeout=30)  # JSON integers are an int64_list, as in TF Serving: refused
    assert r.status_code == 400 and "is a int64_list; the model's input takes a float_list" in r.json()["error"]
    r = httpx.post(url, json={"examples": [{"image": x[0].ravel().tolist()}]}, timeout=30)  # serving_default
    assert r.status_code == 400 and "No classification inputs found in SignatureDef" in r.json()["error"]
    r = httpx.post(url, json={"instances": [1]}, timeout=30)
    assert r.status_code == 400 and "examples" in r.json()["error"]


def test_zoo_client_classifies_over_grpc_and_rest(served):
    from zoo.deploy.serve import Client

    model, x, _, _, server = served
    expected = model.predict(x[:2], verbose=0)
    for url in (server.grpc_target, server.rest_url):
        with Client(url) as client:
            rows = client.classify([{"image": image} for image in x[:2]], model="tiny")
        assert [[label for label, _ in row] for row in rows] == [CLASSES, CLASSES], url
        np.testing.assert_allclose([[score for _, score in row] for row in rows], expected, atol=1e-6, err_msg=url)
