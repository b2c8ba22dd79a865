"""tensorflow_serving/util/json_tensor_test.cc, case by case: JSON <-> tensors.

The request side calls the codec (`parse_predict_json`) with the test's TensorInfo map and compares the
tensors with the test's expected TensorProtos; the response side feeds the test's TensorProtos to
`predict_response` and compares with its expected JSON (`CompareJson`: parsed, numbers as numbers;
`CompareJsonAllValuesAsStrings`: number tokens as written). One case of each kind also goes over HTTP
to the `echo` model. Error cases assert INVALID_ARGUMENT and the test's `HasSubstr`.
"""

import json
import math
import re

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import tensor_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import classification_pb2, regression_pb2

from zoo.deploy.serve import classify, codec
from zoo.deploy.serve.errors import ServingError

SRC = "json_tensor_test.cc"


def _signature(**dtypes):
    signature = meta_graph_pb2.SignatureDef()
    for name, dtype in dtypes.items():
        text_format.Parse(f"dtype: {dtype}", signature.inputs[name])
    return signature


def _parse(body: str, **dtypes):
    signature = _signature(**dtypes)
    return codec.parse_predict_json(body.encode(), lambda name: signature, max_depth=64)


def _proto(text: str) -> np.ndarray:
    return tf.make_ndarray(text_format.Parse(text, tensor_pb2.TensorProto()))


def _assert_tensor(array, text: str):
    expected = _proto(text)
    assert array.dtype == expected.dtype and array.shape == expected.shape, (array.dtype, array.shape)
    np.testing.assert_array_equal(array, expected)


def _error(body: str, **dtypes) -> ServingError:
    with pytest.raises(ServingError) as e:
        _parse(body, **dtypes)
    return e.value


INT_3x2 = "dtype: DT_INT32 tensor_shape { dim { size: 3 } dim { size: 2 } } " + \
    " ".join(f"int_val: {i}" for i in range(1, 7))


# ---- FillPredictRequestFromJson ------------------------------------------------------------------------

def test_single_unnamed_tensor():  # json_tensor_test.cc::SingleUnnamedTensor
    _, tensors, row = _parse('{"instances": [[1,2],[3,4],[5,6]]}', default="DT_INT32")
    assert row is True
    _assert_tensor(tensors["default"], INT_3x2)


def test_single_unnamed_tensor_over_http(http):  # json_tensor_test.cc::SingleUnnamedTensor, through the server
    r = http.post("/v1/models/echo:predict", content=b'{"instances": [[1,2],[3,4],[5,6]]}')
    assert r.status_code == 200 and r.json() == {"predictions": [[1, 2], [3, 4], [5, 6]]}


def test_deeply_nested_well_formed(http):
    """json_tensor_test.cc::DeeplyNestedWellFormed: 500000 nested brackets under an unknown key are ignored
    by TF Serving (rapidjson parses iteratively). Zoo's documented difference: JSON nested deeper than
    `--max-json-depth` (32) is refused with 400 before parsing, as Python's parser recurses."""
    body = '{"instances":[1], "nested":' + "[" * 500000 + "]" * 500000 + "}"
    r = http.post("/v1/models/echo:predict", content=body.encode())
    assert r.status_code == 400 and "exceeds the limit of 32" in r.json()["error"]
    shallow = '{"instances":[1], "nested":' + "[" * 20 + "]" * 20 + "}"  # within the limit: as TF Serving
    assert http.post("/v1/models/echo:predict", content=shallow.encode()).json() == {"predictions": [1]}


def test_deeply_nested_malformed(http):  # json_tensor_test.cc::DeeplyNestedMalformed (depth as above)
    e = _error('{"signature_name":' + "[" * 20 + "]" * 20 + "}", default="DT_INT32")
    assert e.code == "INVALID_ARGUMENT" and "key must be a string value" in e.message
    r = http.post("/v1/models/echo:predict", content=('{"signature_name":' + "[" * 500000 + "]" * 500000 + "}").encode())
    assert r.status_code == 400


def test_mixed_input_for_float_tensor():  # json_tensor_test.cc::MixedInputForFloatTensor
    _, tensors, _ = _parse('{"instances": [1, 2.0, 3, 4, 5.003, 0.007, 0.0]}', default="DT_FLOAT")
    _assert_tensor(tensors["default"], "dtype: DT_FLOAT tensor_shape { dim { size: 7 } } float_val: 1 float_val: 2.0 "
                                       "float_val: 3 float_val: 4 float_val: 5.003 float_val: 0.007 float_val: 0.0")


def test_mixed_input_for_double_tensor():  # json_tensor_test.cc::MixedInputForDoubleTensor
    _, tensors, _ = _parse('{"instances": [1.0, 2, 3, 4, 0.662, 0, 0.0]}', default="DT_DOUBLE")
    _assert_tensor(tensors["default"], "dtype: DT_DOUBLE tensor_shape { dim { size: 7 } } double_val: 1.0 "
                                       "double_val: 2 double_val: 3 double_val: 4 double_val: 0.662 double_val: 0 "
                                       "double_val: 0.0")


def test_float_tensor_with_precision_loss(http):  # json_tensor_test.cc::FloatTensorWithPrecisionLoss
    for body in ('{"instances": [1435774380]}', '{"instances": [1435774380.0]}'):
        _, tensors, _ = _parse(body, default="DT_FLOAT")
        _assert_tensor(tensors["default"], "dtype: DT_FLOAT tensor_shape { dim { size: 1 } } float_val: 1435774380")
    r = http.post("/v1/models/echo:predict", content=b'{"signature_name": "float", "instances": [1435774380]}')
    assert r.status_code == 200 and _tokens(r.text) == ["1.43577434e+09"]  # WriteDecimal: %g does not round-trip


def test_float_tensor_that_exceeds_max_returns_inf():  # json_tensor_test.cc::FloatTensorThatExceedsMaxReturnsInf
    for value, token in ((1.7976931348623157e308, "inf"), (-1.7976931348623157e308, "-inf")):
        _, tensors, _ = _parse(f'{{ "instances": [{value!r}] }}', default="DT_FLOAT")
        _assert_tensor(tensors["default"], f"dtype: DT_FLOAT tensor_shape {{ dim {{ size: 1 }} }} float_val: {token}")


def test_float_tensor_that_exceeds_min_returns_zero():  # json_tensor_test.cc::FloatTensorThatExceedsMinReturnsZero
    for value in (2.2250738585072014e-308, -2.2250738585072014e-308):
        _, tensors, _ = _parse(f'{{ "instances": [{value!r}] }}', default="DT_FLOAT")
        assert tensors["default"].tolist() == [0.0] and math.copysign(1, tensors["default"][0]) == math.copysign(1, value)


def test_single_unnamed_tensor_with_signature():  # json_tensor_test.cc::SingleUnnamedTensorWithSignature
    name, tensors, _ = _parse('{"signature_name": "predict_images", "instances": [[1,2]]}', default="DT_INT32")
    assert name == "predict_images"
    _assert_tensor(tensors["default"], "dtype: DT_INT32 tensor_shape { dim { size: 1 } dim { size: 2 } } "
                                       "int_val: 1 int_val: 2")


def test_tensor_from_non_null_terminated_buffer():  # json_tensor_test.cc::TensorFromNonNullTerminatedBuffer
    _, tensors, _ = _parse('{"instances": [[1,2],[3,4],[5,6]]}X'[:-1], default="DT_INT32")
    _assert_tensor(tensors["default"], INT_3x2)


@pytest.mark.parametrize("body, shape", [
    pytest.param('{"instances": [ { "b64" : "aGVsbG8=" }, { "b64": "d29ybGQ=" } ]}', "dim { size: 2 }",
                 id=f"{SRC}::SingleUnnamedTensorBase64Scalars"),
    pytest.param('{"instances": [ [{ "b64" : "aGVsbG8=" }], [{ "b64": "d29ybGQ=" }] ]}',
                 "dim { size: 2 } dim { size: 1 }", id=f"{SRC}::SingleUnnamedTensorBase64Lists"),
    pytest.param('{"instances": [{"default": [ [{ "b64" : "aGVsbG8=" }], [{ "b64": "d29ybGQ=" }] ]}]}',
                 "dim { size: 1 } dim { size: 2 } dim { size: 1 }", id=f"{SRC}::SingleNamedTensorBase64"),
])
def test_base64(body, shape):
    _, tensors, _ = _parse(body, default="DT_STRING")
    _assert_tensor(tensors["default"], f'dtype: DT_STRING tensor_shape {{ {shape} }} string_val: "hello" '
                                       'string_val: "world"')


def test_base64_over_http(http):  # json_tensor_test.cc::SingleUnnamedTensorBase64Scalars, through the server
    r = http.post("/v1/models/echo:predict", content=b'{"signature_name": "string", '
                                                     b'"instances": [ { "b64" : "aGVsbG8=" }, { "b64": "d29ybGQ=" } ]}')
    assert r.status_code == 200 and r.json() == {"predictions": ["hello", "world"]}


def test_multiple_named_tensor():  # json_tensor_test.cc::MultipleNamedTensor
    _, tensors, row = _parse('''{"instances": [
        {"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"], "float_tensor": [1.0, NaN], "dbl_tensor": [NaN]},
        {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"], "float_tensor": [2.0, Infinity],
         "dbl_tensor": [2.0]}]}''', int_tensor="DT_INT32", str_tensor="DT_STRING", float_tensor="DT_FLOAT",
                             dbl_tensor="DT_DOUBLE")
    assert row and len(tensors) == 4
    _assert_tensor(tensors["int_tensor"], "dtype: DT_INT32 tensor_shape { dim { size: 2 } dim { size: 3 } dim { size: 2 } } "
                   + " ".join(f"int_val: {v}" for v in [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]))
    _assert_tensor(tensors["str_tensor"], 'dtype: DT_STRING tensor_shape { dim { size: 2 } dim { size: 2 } } '
                                          'string_val: "foo" string_val: "bar" string_val: "baz" string_val: "bat"')
    np.testing.assert_array_equal(tensors["float_tensor"], np.array([[1.0, np.nan], [2.0, np.inf]], np.float32))
    np.testing.assert_array_equal(tensors["dbl_tensor"], np.array([[np.nan], [2.0]], np.float64))


def test_single_unnamed_tensor_columnar_format():  # json_tensor_test.cc::SingleUnnamedTensorColumnarFormat
    expected = "dtype: DT_INT32 tensor_shape { dim { size: 1 } dim { size: 3 } dim { size: 2 } } " + \
        " ".join(f"int_val: {i}" for i in range(1, 7))
    for body in ('{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]]}}', '{"inputs": [[[1,2],[3,4],[5,6]]]}'):
        _, tensors, row = _parse(body, int_tensor="DT_INT32")
        assert row is False
        _assert_tensor(tensors["int_tensor"], expected)


def test_multiple_named_tensor_columnar_format(http):
    """json_tensor_test.cc::MultipleNamedTensorColumnarFormat. Over HTTP zoo differs knowingly: inputs of
    different leading sizes ([1, 3, 2] and [2]) are refused, as its batching needs one batch size."""
    _, tensors, _ = _parse('{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]], "str_tensor": ["foo", "bar"], '
                           '"bin_tensor": { "b64" : "aGVsbG8=" }}}',
                           int_tensor="DT_INT32", str_tensor="DT_STRING", bin_tensor="DT_STRING")
    assert len(tensors) == 3
    _assert_tensor(tensors["str_tensor"], 'dtype: DT_STRING tensor_shape { dim { size: 2 } } string_val: "foo" '
                                          'string_val: "bar"')
    _assert_tensor(tensors["bin_tensor"], 'dtype: DT_STRING tensor_shape {} string_val: "hello"')
    r = http.post("/v1/models/echo:predict", json={"signature_name": "multi", "inputs": {
        "int_tensor": [[[1, 2], [3, 4], [5, 6]]], "str_tensor": ["foo", "bar"]}})
    assert r.status_code == 400 and "different batch sizes" in r.json()["error"]


@pytest.mark.parametrize("body, substring", [
    ("", "document is empty"),
    ('{"signature_name": 5, "instances": [[1,2],[3,4],[5,6,7]]}', "must be a string value"),
    ('{"instances": [[1,2],[3,4],[5,6,7]], "inputs": [[1,2],[3,4],[5,6,7]]}', "Not formatted correctly"),
    ('{"instances": [[1,2],[3,4],[5,6,7]]}', "Expecting tensor size"),
    ('{"instances": [[1,2],[3,4],[[5,6]]]}', "Expecting shape"),
    ('{"instances": [1, [1]]}', "Expecting shape"),
    ('{"instances": [[1,2],["a", "b"]]}', "not of expected type"),
], ids=lambda v: None)
def test_single_unnamed_tensor_errors(body, substring):  # json_tensor_test.cc::SingleUnnamedTensorErrors
    e = _error(body, default="DT_INT32")
    assert e.code == "INVALID_ARGUMENT" and substring in e.message, e.message


def test_single_unnamed_tensor_errors_over_http(http):  # json_tensor_test.cc::SingleUnnamedTensorErrors
    r = http.post("/v1/models/echo:predict", content=b'{"instances": [[1,2],[3,4],[5,6,7]]}')
    assert r.status_code == 400 and "Expecting tensor size" in r.json()["error"]


@pytest.mark.parametrize("body, substring", [
    ('{"instances": [{"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"]}, '
     '{"int_tensor": [[[7,8],[9,0],[1,2]]], "str_tensor": ["baz", "bat"]}]}', "Expecting shape"),
    ('{"instances": [{"int_tensor": [[1,2],[3,4],[5,6],[7,8]], "str_tensor": ["foo", "bar"]}, '
     '{"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"]}]}', "Expecting tensor size"),
    ('{"instances": [{"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"]}, [1, 20, 30], '
     '{"int_tensor": [[[7,8],[9,0],[1,2]]], "str_tensor": ["baz", "bat"]}]}', "Expecting object but got list"),
])
def test_multiple_named_tensor_errors(body, substring):  # json_tensor_test.cc::MultipleNamedTensorErrors
    e = _error(body, int_tensor="DT_INT32", str_tensor="DT_STRING")
    assert e.code == "INVALID_ARGUMENT" and substring in e.message, e.message


def test_multiple_named_tensor_errors_list_then_object():  # json_tensor_test.cc::MultipleNamedTensorErrors (last)
    e = _error('{"instances": [["baz", "bar"], {"str_tensor": ["baz", "bat"]}]}', str_tensor="DT_STRING")
    assert "Expecting value/list but got object" in e.message


# ---- MakeJsonFromTensors ---------------------------------------------------------------------------------

def _json(tensors: dict, row: bool) -> str:
    return codec.predict_response({k: _proto(v) for k, v in tensors.items()}, row).decode()


INT_2x3x2 = "dtype: DT_INT32 tensor_shape { dim { size: 2 } dim { size: 3 } dim { size: 2 } } " + \
    " ".join(f"int_val: {v}" for v in [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2])


def test_from_json_single_tensor():  # json_tensor_test.cc::FromJsonSingleTensor
    values = [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]]
    assert json.loads(_json({"int_tensor": INT_2x3x2}, True)) == {"predictions": values}
    assert json.loads(_json({"int_tensor": INT_2x3x2}, False)) == {"outputs": values}


def test_from_json_single_scalar_tensor(http):  # json_tensor_test.cc::FromJsonSingleScalarTensor
    tensor = "dtype: DT_INT32 tensor_shape { dim { size: 5 } } " + " ".join(f"int_val: {i}" for i in range(1, 6))
    assert json.loads(_json({"int_tensor": tensor}, True)) == {"predictions": [1, 2, 3, 4, 5]}
    assert json.loads(_json({"int_tensor": tensor}, False)) == {"outputs": [1, 2, 3, 4, 5]}
    assert http.post("/v1/models/echo:predict", json={"inputs": [1, 2, 3, 4, 5]}).json() == {"outputs": [1, 2, 3, 4, 5]}


def test_from_json_single_bytes_tensor(http):  # json_tensor_test.cc::FromJsonSingleBytesTensor
    tensor = 'dtype: DT_STRING tensor_shape { dim { size: 2 } dim { size: 2 } } string_val: "hello" ' \
             'string_val: "world" string_val: "tf" string_val: "serving"'
    expected = {"predictions": [[{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}], [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}]]}
    assert json.loads(_json({"str_tensor_bytes": tensor}, True)) == expected
    r = http.post("/v1/models/echo:predict", json={"signature_name": "bytes", "instances": [["hello", "world"],
                                                                                           ["tf", "serving"]]})
    assert r.json() == expected


def _tokens(text: str) -> list[str]:
    """The number tokens of a JSON text, as written (CompareJsonAllValuesAsStrings)."""
    return re.findall(r"-?Infinity|NaN|-?[0-9][0-9.e+-]*", text)


def test_from_json_single_float_tensor_six_digit_precision(http):
    """json_tensor_test.cc::FromJsonSingleFloatTensorSixDigitPrecision: numbers as TF Serving writes them."""
    tensor = "dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 3 } } float_val: 9000000 float_val: 999999 " \
             "float_val: 0.50000 float_val: .0003 float_val: .00003 float_val: 555557.5"
    expected = ["9e+06", "999999.0", "0.5", "0.0003", "3e-05", "555557.5"]
    assert _tokens(_json({"float_tensor": tensor}, True)) == expected
    r = http.post("/v1/models/echo:predict", json={"signature_name": "float", "instances": [
        [9000000, 999999, 0.5], [0.0003, 0.00003, 555557.5]]})
    assert _tokens(r.text) == expected


def test_from_json_single_float_tensor_non_finite(http):  # json_tensor_test.cc::FromJsonSingleFloatTensorNonFinite
    tensor = "dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } } float_val: NaN float_val: Infinity " \
             "float_val: 3 float_val: -Infinity"
    expected = ["NaN", "Infinity", "3.0", "-Infinity"]
    assert _tokens(_json({"float_tensor": tensor}, True)) == expected
    r = http.post("/v1/models/echo:predict", content=b'{"signature_name": "float", '
                                                     b'"instances": [[NaN, Infinity], [3, -Infinity]]}')
    assert _tokens(r.text.split('"warnings"')[0]) == expected


def test_from_json_single_tensor_errors():  # json_tensor_test.cc::FromJsonSingleTensorErrors
    with pytest.raises(ServingError, match="empty tensor map"):
        codec.predict_response({}, True)
    with pytest.raises(ServingError, match="tensor type: complex64") as e:
        _json({"tensor": "dtype: DT_COMPLEX64 tensor_shape { dim { size: 2 } } scomplex_val: 1.0 scomplex_val: 2.0 "
                         "scomplex_val: 3.0 scomplex_val: 4.0"}, True)
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ServingError, match="no shape information"):
        _json({"tensor": "dtype: DT_INT32 int_val: 1"}, True)


def test_unconvertible_dtype_over_http(http):
    """json_tensor.cc's AddValueToTensor (the dtype case the tests of ::FromJsonSingleTensorErrors mirror for
    outputs): JSON cannot carry a half tensor, UNIMPLEMENTED (501)."""
    r = http.post("/v1/models/echo:predict", json={"signature_name": "half", "inputs": [1.0]})
    assert r.status_code == 501 and "Conversion of JSON Value: 1.0 to type: half" in r.json()["error"]


MULTI = {
    "int_tensor": INT_2x3x2,
    "str_tensor": 'dtype: DT_STRING tensor_shape { dim { size: 2 } dim { size: 2 } } string_val: "foo" '
                  'string_val: "bar" string_val: "baz" string_val: "bat"',
    "float_tensor": "dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 1 } } float_val: 1.0 float_val: 2.0",
    "double_scalar_tensor": "dtype: DT_DOUBLE tensor_shape { dim { size: 2 } } double_val: 8.0 double_val: 9.0",
    "str_tensor_bytes": 'dtype: DT_STRING tensor_shape { dim { size: 2 } dim { size: 2 } } string_val: "hello" '
                        'string_val: "world" string_val: "tf" string_val: "serving"',
}


def test_from_json_multiple_named_tensors():  # json_tensor_test.cc::FromJsonMultipleNamedTensors
    assert json.loads(_json(MULTI, True)) == {"predictions": [
        {"double_scalar_tensor": 8.0, "float_tensor": [1.0], "int_tensor": [[1, 2], [3, 4], [5, 6]],
         "str_tensor": ["foo", "bar"], "str_tensor_bytes": [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}]},
        {"double_scalar_tensor": 9.0, "float_tensor": [2.0], "int_tensor": [[7, 8], [9, 0], [1, 2]],
         "str_tensor": ["baz", "bat"], "str_tensor_bytes": [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}]}]}
    assert json.loads(_json(MULTI, False)) == {"outputs": {
        "double_scalar_tensor": [8.0, 9.0], "float_tensor": [[1.0], [2.0]],
        "int_tensor": [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]],
        "str_tensor": [["foo", "bar"], ["baz", "bat"]],
        "str_tensor_bytes": [[{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}], [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}]]}}


def test_from_json_multiple_named_tensors_errors():  # json_tensor_test.cc::FromJsonMultipleNamedTensorsErrors
    with pytest.raises(ServingError, match="inconsistent batch size"):
        _json({"int_tensor": "dtype: DT_INT32 tensor_shape { dim { size: 2 } dim { size: 3 } } "
                             + " ".join(f"int_val: {i}" for i in range(1, 7)),
               "str_tensor": 'dtype: DT_STRING tensor_shape { dim { size: 1 } dim { size: 3 } } string_val: "foo" '
                             'string_val: "bar" string_val: "baz"'}, True)


def test_from_json_zero_batch_tensors():
    """json_tensor_test.cc::FromJsonSingleZeroBatchTensor, ::FromJsonMultipleZeroBatchTensors"""
    assert json.loads(_json({"int_tensor": "dtype: DT_INT32 tensor_shape { dim { size: 0 } dim { size: 2 } }"},
                            True)) == {"predictions": []}
    assert json.loads(_json({
        "str_tensor": "dtype: DT_STRING tensor_shape { dim { size: 0 } dim { size: 1 } dim { size: 2 } }",
        "float_tensor": "dtype: DT_FLOAT tensor_shape { dim { size: 0 } dim { size: 3 } dim { size: 4 } }"},
        True)) == {"predictions": []}


def test_from_json_multiple_zero_batch_tensors_errors():  # json_tensor_test.cc::FromJsonMultipleZeroBatchTensorsErrors
    with pytest.raises(ServingError, match="inconsistent batch size"):
        _json({"int_tensor": "dtype: DT_INT32 tensor_shape { dim { size: 0 } dim { size: 2 } }",
               "str_tensor": 'dtype: DT_STRING tensor_shape { dim { size: 1 } dim { size: 2 } } string_val: "foo" '
                             'string_val: "bar"'}, True)


# ---- FillClassificationRequestFromJson, FillRegressionRequestFromJson -------------------------------------

REQUESTS = [classification_pb2.ClassificationRequest, regression_pb2.RegressionRequest]


@pytest.mark.parametrize("request_type", REQUESTS)
def test_request_no_context(request_type):  # json_tensor_test.cc::RequestNoContext
    request = classify.request_from_json(b'''{"examples": [
        {"names": [ "foo", "bar" ], "ratings": [ 8.0, 9.0 ], "age": 20},
        {"names": [ "baz" ], "ratings": 6.0}]}''', request_type())
    expected = text_format.Parse('''input { example_list {
        examples { features {
          feature { key: "names" value { bytes_list { value: "foo" value: "bar" } } }
          feature { key: "ratings" value { float_list { value: 8.0 value: 9.0 } } }
          feature { key: "age" value { int64_list { value: 20 } } } } }
        examples { features {
          feature { key: "names" value { bytes_list { value: "baz" } } }
          feature { key: "ratings" value { float_list { value: 6.0 } } } } } } }''', request_type())
    assert request == expected


@pytest.mark.parametrize("request_type", REQUESTS)
def test_request_with_context_and_signature(request_type):  # json_tensor_test.cc::RequestWithContextAndSignature
    request = classify.request_from_json(b'''{"signature_name": "custom_signture",
      "context": {"query": "pizza", "location": [ "sfo" ]},
      "examples": [
        {"names": [ "foo", "bar" ], "ratings": [ 8.0, 9.0, NaN, Infinity ], "age": 20},
        {"names": [ "baz", { "b64": "aGVsbG8=" } ], "ratings": 6.0, "intboolmix": [ 1, true, false ]},
        {"names": "bar", "ratings": -Infinity}]}''', request_type())
    assert request.model_spec.signature_name == "custom_signture"
    data = request.input.example_list_with_context
    context = data.context.features.feature
    assert list(context["query"].bytes_list.value) == [b"pizza"] and list(context["location"].bytes_list.value) == [b"sfo"]
    first, second, third = (e.features.feature for e in data.examples)
    assert list(first["names"].bytes_list.value) == [b"foo", b"bar"] and list(first["age"].int64_list.value) == [20]
    np.testing.assert_array_equal(first["ratings"].float_list.value, [8.0, 9.0, np.nan, np.inf])
    assert list(second["names"].bytes_list.value) == [b"baz", b"hello"]
    assert list(second["ratings"].float_list.value) == [6.0] and list(second["intboolmix"].int64_list.value) == [1, 1, 0]
    assert list(third["names"].bytes_list.value) == [b"bar"] and list(third["ratings"].float_list.value) == [-np.inf]


@pytest.mark.parametrize("request_type", REQUESTS)
@pytest.mark.parametrize("body, substring", [
    ('{"signature_name": [ "hello" ], "examples": [ { "names": [ "foo", "bar" ] } ]}',
     "'signature_name' key must be a string"),
    ('{"context": [ { "names": [ "foo", "bar" ] } ]}', "Example must be JSON object"),
    ('{"examples": { "names": [ "foo", "bar" ] }}', "list/array"),
    ('{"examples": [ [ { "names": [ "foo", "bar" ] } ] ]}', "Example must be JSON object"),
    ('{"examples": [ { "names": [ 10, null ] } ]}', "names has element with unexpected JSON type: Null"),
    ('{"examples": [ { "names": [ 10, 10.0 ] } ]}', "feature: names expecting type: int64"),
    ('{"examples": [ { "names": [ 10, { "test": 10 } ] } ]}', "names has element with unexpected JSON type: Object"),
    ('{"examples": [ { "names": [ [10], 20 ] } ]}', "names has element with unexpected JSON type: Array"),
    ('{"examples": [ { "names": [ 20, 18446744073709551603 ] } ]}', "Only int64_t is supported"),
], ids=lambda v: None)
def test_json_errors(request_type, body, substring):  # json_tensor_test.cc::JsonErrors
    with pytest.raises(ServingError) as e:
        classify.request_from_json(body.encode(), request_type())
    assert e.value.code == "INVALID_ARGUMENT" and substring in e.value.message, e.value.message


def test_json_errors_over_http(http):  # json_tensor_test.cc::JsonErrors, through the server
    r = http.post("/v1/models/default:regress", content=b'{"examples": [ { "names": [ 10, null ] } ]}')
    assert r.status_code == 400 and "names has element with unexpected JSON type: Null" in r.json()["error"]


# ---- MakeJsonFromClassificationResult, MakeJsonFromRegressionResult, MakeJsonFromStatus -------------------

def test_json_from_classification_result():  # json_tensor_test.cc::JsonFromClassificationResult
    result = text_format.Parse('''
        classifications { classes { label: "car" score: 0.2 } classes { label: "bike" score: 0.7 }
                          classes { label: "bus" score: 0.1 } }
        classifications { classes { label: "car" score: 0.7 } classes { label: "bike" score: 0.1 }
                          classes { label: "bus" score: 0.2 } }''', classification_pb2.ClassificationResult())
    assert json.loads(classify.classification_json(result)) == {"results": [
        [["car", 0.2], ["bike", 0.7], ["bus", 0.1]], [["car", 0.7], ["bike", 0.1], ["bus", 0.2]]]}


def test_json_from_regression_result():  # json_tensor_test.cc::JsonFromRegressionResult
    result = text_format.Parse("regressions { value: 0.2 } regressions { value: 0.9 } regressions { value: 1.0 }",
                               regression_pb2.RegressionResult())
    assert json.loads(classify.regression_json(result)) == {"results": [0.2, 0.9, 1.0]}


def test_json_from_regression_result_with_non_finite():  # json_tensor_test.cc::JsonFromRegressionResultWithNonFinite
    result = text_format.Parse("regressions { value: 0.2 } regressions { value: Infinity } regressions { value: 1.0 } "
                               "regressions { value: -Infinity } regressions { value: NaN }",
                               regression_pb2.RegressionResult())
    assert _tokens(classify.regression_json(result).decode()) == ["0.2", "Infinity", "1.0", "-Infinity", "NaN"]


def test_json_from_result_errors():  # json_tensor_test.cc::JsonFromResultErrors
    with pytest.raises(ServingError, match="empty ClassificationResults"):
        classify.classification_json(classification_pb2.ClassificationResult())
    with pytest.raises(ServingError, match="empty RegressionResults"):
        classify.regression_json(regression_pb2.RegressionResult())


def test_status_error():  # json_tensor_test.cc::StatusError (MakeJsonFromStatus)
    for message in ('Bad key: "key"', "Bad key: 'key'"):
        assert json.loads(codec.encode_json(codec.error_body(message))) == {"error": message}
