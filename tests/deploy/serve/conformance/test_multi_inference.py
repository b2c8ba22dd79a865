"""tensorflow_serving/servables/tensorflow/multi_inference_test.cc, over real gRPC, on `default`
(half_plus_two; the test's servable version is 1, here 123). Not reproduced: `ThreadPoolOptions`."""

import grpc
import pytest
from tensorflow_serving.apis import inference_pb2

MODEL = "default"
REGRESS, CLASSIFY, PREDICT = "tensorflow/serving/regress", "tensorflow/serving/classify", "tensorflow/serving/predict"


def _request(*tasks, x=2.0, name=MODEL):
    request = inference_pb2.MultiInferenceRequest()
    if x is not None:  # multi_inference_test.cc: AddInput({{"x", 2}}, &request)
        request.input.example_list.examples.add().features.feature["x"].float_list.value.append(x)
    for signature, method, *model in tasks:
        task = request.tasks.add()
        task.model_spec.name = model[0] if model else name
        task.model_spec.signature_name = signature
        task.method_name = method
    return request


def _fails(stub, request, code, substring):
    with pytest.raises(grpc.RpcError) as e:
        stub.MultiInference(request, timeout=30)
    assert e.value.code() == code and substring in e.value.details(), (e.value.code(), e.value.details())


@pytest.mark.parametrize("request_, code, substring", [
    pytest.param(_request(("regress_x_to_y", REGRESS), x=None), grpc.StatusCode.INVALID_ARGUMENT, "Input is empty",
                 id="multi_inference_test.cc::MissingInputTest"),
    pytest.param(_request(("ThisSignatureDoesNotExist", REGRESS)), grpc.StatusCode.INVALID_ARGUMENT,
                 "signature not found", id="multi_inference_test.cc::UndefinedSignatureTest"),
    pytest.param(_request(("regress_x_to_y", REGRESS), ("regress_x_to_y", REGRESS, "ModelDoesNotExist")),
                 grpc.StatusCode.INVALID_ARGUMENT, "must access the same model name",
                 id="multi_inference_test.cc::InconsistentModelSpecsInRequestTest"),
    pytest.param(_request(("regress_x_to_y", REGRESS), ("regress_x_to_y", REGRESS)), grpc.StatusCode.INVALID_ARGUMENT,
                 "Duplicate evaluation of signature: regress_x_to_y",
                 id="multi_inference_test.cc::EvaluateDuplicateSignaturesTest"),
    pytest.param(_request(("serving_default", PREDICT)), grpc.StatusCode.UNIMPLEMENTED, "Unsupported signature",
                 id="multi_inference_test.cc::UsupportedSignatureTypeTest"),
])
def test_errors(stub, request_, code, substring):
    _fails(stub, request_, code, substring)


def _expected(request, *results):
    """The test's expected response: per task its model spec with the version, and the result."""
    expected = inference_pb2.MultiInferenceResponse()
    for task, (kind, value) in zip(request.tasks, results):
        result = expected.results.add()
        result.model_spec.CopyFrom(task.model_spec)
        result.model_spec.version.value = 123
        if kind == "regress":
            result.regression_result.regressions.add().value = value
        else:
            result.classification_result.classifications.add().classes.add().score = value
    return expected


def test_valid_single_signature(stub):  # multi_inference_test.cc::ValidSingleSignatureTest
    request = _request(("regress_x_to_y", REGRESS))
    assert stub.MultiInference(request, timeout=30) == _expected(request, ("regress", 3.0))


def test_multiple_valid_regress_signatures(stub):  # multi_inference_test.cc::MultipleValidRegressSignaturesTest
    request = _request(("regress_x_to_y", REGRESS), ("regress_x_to_y2", REGRESS))
    assert stub.MultiInference(request, timeout=30) == _expected(request, ("regress", 3.0), ("regress", 4.0))


def test_regress_and_classify_signatures(stub):  # multi_inference_test.cc::RegressAndClassifySignaturesTest
    request = _request(("regress_x_to_y", REGRESS), ("classify_x_to_y", CLASSIFY))
    assert stub.MultiInference(request, timeout=30) == _expected(request, ("regress", 3.0), ("classify", 3.0))
