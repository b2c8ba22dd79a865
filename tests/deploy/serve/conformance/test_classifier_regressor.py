"""tensorflow_serving/servables/tensorflow/classifier_test.cc and regressor_test.cc, over real gRPC.

Those tests run TF Serving's classifier and regressor on a `FakeSession` whose classes and scores (or
regression output) are the examples' `class` and `score` (`output`) features; `models.py` builds it as
`fake_classifier` and `fake_regressor`, with the tests' named signatures and one signature per malformed
output the tests make their fake session return (where a test edits `serving_default`, the edited
signature has a name of its own here). The tests run with the method name check on and off
(`INSTANTIATE_TEST_SUITE_P(..., ::testing::Bool())`); TF Serving's default, and this server, is off: the
signatures here are native TF2 ones, of method `tensorflow/serving/predict`. Not reproduced: `RunsFails`
(a session that fails outright).
"""

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2, regression_pb2

CLASSIFIER, REGRESSOR = "fake_classifier", "fake_regressor"


def _example(pairs):
    """classifier_test.cc: `example({{label, score}, ...})`."""
    return tf.train.Example(features=tf.train.Features(feature={
        "class": tf.train.Feature(bytes_list=tf.train.BytesList(value=[k.encode() for k, _ in pairs])),
        "score": tf.train.Feature(float_list=tf.train.FloatList(value=[v for _, v in pairs]))}))


def _output(value):
    """regressor_test.cc: `example_with_output(value)`."""
    return tf.train.Example(features=tf.train.Features(feature={
        "output": tf.train.Feature(float_list=tf.train.FloatList(value=[value]))}))


def _classify_request(signature="", examples=((("dos", 2), ("uno", 1)), (("cuatro", 4), ("tres", 3)))):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = CLASSIFIER
    request.model_spec.signature_name = signature
    for pairs in examples:
        request.input.example_list.examples.add().CopyFrom(_example(pairs))
    return request


def _regress_request(signature="", outputs=(2.0, 3.0)):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = REGRESSOR
    request.model_spec.signature_name = signature
    for value in outputs:
        request.input.example_list.examples.add().CopyFrom(_output(value))
    return request


def _result(response):
    return [[(c.label, c.score) for c in row.classes] for row in response.result.classifications]


def _fails(call, request, substring="", code=grpc.StatusCode.INVALID_ARGUMENT):
    with pytest.raises(grpc.RpcError) as e:
        call(request, timeout=30)
    assert e.value.code() == code and substring in e.value.details(), (e.value.code(), e.value.details())


# ---- classifier_test.cc ------------------------------------------------------------------------------------

def test_example_list(stub):  # classifier_test.cc::ExampleList
    response = stub.Classify(_classify_request(), timeout=30)
    assert _result(response) == [[("dos", 2), ("uno", 1)], [("cuatro", 4), ("tres", 3)]]


def test_example_list_with_context(stub):  # classifier_test.cc::ExampleListWithContext
    request = _classify_request(examples=())
    data = request.input.example_list_with_context
    data.context.CopyFrom(_example((("dos", 2), ("uno", 1))))
    data.examples.add()
    data.examples.add()
    assert _result(stub.Classify(request, timeout=30)) == [[("dos", 2), ("uno", 1)]] * 2


def test_example_list_with_context_duplicate_features(stub):  # classifier_test.cc::ExampleListWithContext_DuplicateFeatures
    request = _classify_request(examples=())
    data = request.input.example_list_with_context
    data.context.CopyFrom(_example((("uno", 1), ("dos", 2))))
    data.examples.add()
    data.examples.add().CopyFrom(_example((("tres", 3), ("cuatro", 4))))  # its own features win over the context's
    assert _result(stub.Classify(request, timeout=30)) == [[("uno", 1), ("dos", 2)], [("tres", 3), ("cuatro", 4)]]


def test_classes_only(stub):  # classifier_test.cc::ClassesOnly
    assert _result(stub.Classify(_classify_request("classes_only"), timeout=30)) == [
        [("dos", 0), ("uno", 0)], [("cuatro", 0), ("tres", 0)]]


def test_scores_only(stub):  # classifier_test.cc::ScoresOnly
    assert _result(stub.Classify(_classify_request("scores_only"), timeout=30)) == [
        [("", 2), ("", 1)], [("", 4), ("", 3)]]


def test_zero_scores_are_present(stub):  # classifier_test.cc::ZeroScoresArePresent
    response = stub.Classify(_classify_request("scores_only", [(("minus", -1), ("zero", 0), ("one", 1))]), timeout=30)
    classes = response.result.classifications[0].classes
    assert len(classes) == 3 and [c.score for c in classes] == [-1, 0, 1]


def test_valid_named_signature(stub):  # classifier_test.cc::ValidNamedSignature
    assert _result(stub.Classify(_classify_request("output_plus_one"), timeout=30)) == [
        [("", 3), ("", 2)], [("", 5), ("", 4)]]


@pytest.mark.parametrize("signature, substring", [
    pytest.param("invalid_regression_signature", "Expected classification signature outputs to contain at least one of",
                 id="classifier_test.cc::InvalidNamedSignature"),
    pytest.param("ImproperlySizedScoresSignature", "Expected Tensor shape: [batch_size num_classes] but got [2,2,10]",
                 id="classifier_test.cc::MalformedScores"),
    pytest.param("no_inputs", "Expected one input Tensor.", id="classifier_test.cc::MissingClassificationSignature"),
    pytest.param("classes_batch", "batch size", id="classifier_test.cc::ClassesIncorrectTensorBatchSize"),
    pytest.param("classes_wrong_type", "Expected classes Tensor of DT_STRING",
                 id="classifier_test.cc::ClassesIncorrectTensorType"),
    pytest.param("scores_batch", "batch size", id="classifier_test.cc::ScoresIncorrectTensorBatchSize"),
    pytest.param("scores_wrong_type", "Expected scores Tensor of DT_FLOAT",
                 id="classifier_test.cc::ScoresIncorrectTensorType"),
    pytest.param("mismatched", "Tensors class and score should match in dim_size(1). Got 2 vs. 3",
                 id="classifier_test.cc::MismatchedNumberOfTensorClasses"),
])
def test_classify_errors(stub, signature, substring):
    _fails(stub.Classify, _classify_request(signature), substring)


@pytest.mark.parametrize("fill", [
    pytest.param(lambda r: None, id="classifier_test.cc::EmptyInput"),
    pytest.param(lambda r: r.input.example_list.SetInParent(), id="classifier_test.cc::EmptyExampleList"),
    pytest.param(lambda r: r.input.example_list_with_context.context.CopyFrom(_example((("dos", 2),))),
                 id="classifier_test.cc::EmptyExampleListWithContext"),
])
def test_classify_empty(stub, fill):
    request = _classify_request(examples=())
    fill(request)
    _fails(stub.Classify, request, "Input is empty")


def test_method_name_check(stub):
    """classifier_test.cc::MethodNameCheck, check off (TF Serving's default): a signature of another method
    name (here `tensorflow/serving/predict`, as every native TF2 signature) classifies."""
    assert len(stub.Classify(_classify_request(), timeout=30).result.classifications) == 2


def test_classify_over_rest(http):  # classifier_test.cc::ExampleList, the REST form of the request
    r = http.post(f"/v1/models/{CLASSIFIER}:classify", json={"examples": [
        {"class": ["dos", "uno"], "score": [2.0, 1.0]}, {"class": ["cuatro", "tres"], "score": [4.0, 3.0]}]})
    assert r.status_code == 200 and r.json() == {"results": [[["dos", 2.0], ["uno", 1.0]], [["cuatro", 4.0],
                                                                                           ["tres", 3.0]]]}


# ---- regressor_test.cc -------------------------------------------------------------------------------------

def _values(response):
    return [r.value for r in response.result.regressions]


def test_basic_example_list(stub):  # regressor_test.cc::BasicExampleList
    assert _values(stub.Regress(_regress_request(), timeout=30)) == [2.0, 3.0]


def test_basic_example_list_with_context(stub):  # regressor_test.cc::BasicExampleListWithContext
    request = _regress_request(outputs=())
    data = request.input.example_list_with_context
    data.examples.add()
    data.examples.add()
    data.context.CopyFrom(_output(3.0))
    assert _values(stub.Regress(request, timeout=30)) == [3.0, 3.0]


def test_regress_valid_named_signature(stub):  # regressor_test.cc::ValidNamedSignature
    response = stub.Regress(_regress_request("output_plus_one"), timeout=30)
    assert _values(response) == [3.0, 4.0]
    assert response.model_spec.name == REGRESSOR and response.model_spec.signature_name == "output_plus_one"


@pytest.mark.parametrize("signature, substring", [
    pytest.param("invalid_classification_signature", "No regression outputs found in SignatureDef",
                 id="regressor_test.cc::InvalidNamedSignature"),
    pytest.param("ImproperlySizedOutputSignature",
                 "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got [2,2]",
                 id="regressor_test.cc::MalformedOutputs"),
    pytest.param("batch", "output batch size", id="regressor_test.cc::UnexpectedOutputTensorSize"),
    pytest.param("wrong_type", "Expected output Tensor of DT_FLOAT", id="regressor_test.cc::UnexpectedOutputTensorType"),
    pytest.param("no_inputs", "Expected one input Tensor.", id="regressor_test.cc::MissingRegressionSignature"),
])
def test_regress_errors(stub, signature, substring):
    _fails(stub.Regress, _regress_request(signature), substring)


@pytest.mark.parametrize("fill", [
    pytest.param(lambda r: None, id="regressor_test.cc::EmptyInput"),
    pytest.param(lambda r: r.input.example_list.SetInParent(), id="regressor_test.cc::EmptyExampleList"),
    pytest.param(lambda r: r.input.example_list_with_context.context.CopyFrom(_output(3.0)),
                 id="regressor_test.cc::EmptyExampleListWithContext"),
])
def test_regress_empty(stub, fill):
    request = _regress_request(outputs=())
    fill(request)
    _fails(stub.Regress, request, "Input is empty")


def test_regress_method_name_check(stub):  # regressor_test.cc::MethodNameCheck, check off (the default)
    assert _values(stub.Regress(_regress_request(), timeout=30)) == [2.0, 3.0]


def test_regress_over_rest(http):  # regressor_test.cc::BasicExampleList, the REST form
    r = http.post(f"/v1/models/{REGRESSOR}:regress", json={"examples": [{"output": 2.0}, {"output": 3.0}]})
    assert r.status_code == 200 and r.json() == {"results": [2.0, 3.0]}
    np.testing.assert_array_equal(r.json()["results"], [2.0, 3.0])
