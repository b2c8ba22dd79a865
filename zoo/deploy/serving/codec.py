"""Tensors in and out of TF Serving's wire formats, checked against the signature.

REST (TF Serving "RESTful API" doc, https://www.tensorflow.org/tfx/serving/api_rest,
"Request format of predict API"):

- row format: `{"instances": [...]}`, one element per example; with several
  inputs each element is `{input_name: value}`. Answered with `{"predictions": [...]}`.
- columnar format: `{"inputs": value}` or `{"inputs": {input_name: value}}`, each a
  whole batch. Answered with `{"outputs": value}` (one output) or `{"outputs": {name: value}}`.
- binary values (DT_STRING tensors) are `{"b64": "<base64>"}`; outputs whose name ends
  in `_bytes` are returned that way too.

gRPC carries `tensorflow.TensorProto`s (`tensorflow/core/framework/tensor.proto`),
converted with `tf.make_ndarray` / `tf.make_tensor_proto`.
"""

from __future__ import annotations

import base64
import binascii
import json

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.framework import types_pb2

from zoo.deploy.serving.errors import invalid

B64 = "b64"


# ---- signature checks (shared by REST and gRPC) ---------------------------------------------

def _dtype_name(enum: int) -> str:
    return types_pb2.DataType.Name(enum)


def check_inputs(inputs: dict[str, np.ndarray], signature) -> dict[str, np.ndarray]:
    """Validates names, dtypes and shapes against `signature` (a `SignatureDef`); returns the inputs."""
    expected = signature.inputs
    unknown = sorted(set(inputs) - set(expected))
    missing = sorted(set(expected) - set(inputs))
    if unknown or missing:
        raise invalid(f"Input names do not match the signature. Expected: {sorted(expected)}; "
                      f"unknown: {unknown}; missing: {missing}.")
    for name, value in inputs.items():
        info = expected[name]
        want = tf.dtypes.as_dtype(info.dtype)
        if tf.dtypes.as_dtype(value.dtype) != want:
            raise invalid(f"Expects arg '{name}' to be {want.name} but {tf.dtypes.as_dtype(value.dtype).name} "
                          f"is provided.")
        if not info.tensor_shape.unknown_rank:
            dims = [d.size for d in info.tensor_shape.dim]
            if value.ndim != len(dims) or any(d >= 0 and d != s for d, s in zip(dims, value.shape)):
                shown = [d if d >= 0 else -1 for d in dims]
                raise invalid(f"Input '{name}' has shape {list(value.shape)}; the signature expects {shown} "
                              f"(-1: any size).")
    batch = {v.shape[0] for v in inputs.values() if v.ndim}
    if len(batch) > 1:
        raise invalid(f"Inputs have different batch sizes: {sorted(batch)}.")
    return inputs


# ---- REST ------------------------------------------------------------------------------------

def _decode_b64(value):
    if isinstance(value, dict):
        if set(value) != {B64} or not isinstance(value[B64], str):
            raise invalid(f'A binary value must be {{"b64": "<base64 string>"}}. Received: {json.dumps(value)[:80]}')
        try:
            return base64.b64decode(value[B64], validate=True)
        except (binascii.Error, ValueError) as e:
            raise invalid(f"Invalid base64 value: {e}") from None
    if isinstance(value, list):
        return [_decode_b64(v) for v in value]
    return value


def _to_array(value, name: str, info) -> np.ndarray:
    """A JSON value as an array of the signature's dtype; JSON of the wrong kind is INVALID_ARGUMENT."""
    dtype = tf.dtypes.as_dtype(info.dtype)
    value = _decode_b64(value)
    try:
        if dtype == tf.string:
            array = np.array(value, dtype=object)
            if array.size and not all(isinstance(v, (str, bytes)) for v in array.flat):
                raise ValueError("expected strings")
            return np.vectorize(lambda v: v.encode() if isinstance(v, str) else v, otypes=[object])(array) \
                if array.size else array
        array = np.array(value)
        if array.dtype == object or array.dtype.kind in "USa":
            raise ValueError("ragged or non-numeric values")
        if dtype.is_integer and array.dtype.kind == "f" and not np.all(np.mod(array, 1) == 0):
            raise ValueError("fractional values for an integer input")
        if dtype.is_floating or dtype.is_integer or dtype == tf.bool:
            return array.astype(dtype.as_numpy_dtype)
        raise ValueError(f"unsupported dtype {dtype.name}")
    except (ValueError, TypeError, OverflowError) as e:
        raise invalid(f"Input '{name}' cannot be read as {dtype.name} ({e}).") from None


def parse_predict_body(body: bytes, signature_for) -> tuple[str, dict[str, np.ndarray], bool]:
    """A REST predict body -> (signature_name, `{input_name: array}`, row_format).

    `signature_for(signature_name)` returns the `SignatureDef` the inputs are checked against.
    """
    try:
        request = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise invalid(f"JSON Parse error: {e}") from None
    if not isinstance(request, dict):
        raise invalid("The request body must be a JSON object with 'instances' or 'inputs'.")
    signature_name = request.get("signature_name", "")
    if not isinstance(signature_name, str):
        raise invalid(f"'signature_name' must be a string. Received: {json.dumps(signature_name)[:80]}")
    signature = signature_for(signature_name)
    if ("instances" in request) == ("inputs" in request):
        raise invalid("Missing 'inputs' or 'instances' key" if "instances" not in request
                      else "Only one of 'inputs' or 'instances' must be set.")
    names = list(signature.inputs)
    if "instances" in request:
        instances = request["instances"]
        if not isinstance(instances, list) or not instances:
            raise invalid("'instances' must be a non-empty list, one element per example.")
        if len(names) == 1 and not (isinstance(instances[0], dict) and B64 not in instances[0]):
            columns = {names[0]: instances}
        else:
            if not all(isinstance(i, dict) for i in instances):
                raise invalid(f"With inputs {names}, each instance must be an object keyed by input name.")
            keys = set(instances[0])
            if any(set(i) != keys for i in instances):
                raise invalid("Every instance must have the same input names.")
            columns = {k: [i[k] for i in instances] for k in keys}
        row = True
    else:
        inputs = request["inputs"]
        if isinstance(inputs, dict) and B64 not in inputs:
            columns = inputs
        elif len(names) == 1:
            columns = {names[0]: inputs}
        else:
            raise invalid(f"With inputs {names}, 'inputs' must be an object keyed by input name.")
        row = False
    unknown = sorted(set(columns) - set(names))
    if unknown:
        raise invalid(f"Input names do not match the signature. Expected: {sorted(names)}; unknown: {unknown}.")
    arrays = {k: _to_array(v, k, signature.inputs[k]) for k, v in columns.items()}
    return signature_name, check_inputs(arrays, signature), row


def _json_value(name: str, array: np.ndarray):
    if array.dtype == object or array.dtype.kind == "S":
        encode = (lambda b: {B64: base64.b64encode(b).decode()}) if name.endswith("_bytes") else \
            (lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else b)
        return np.vectorize(encode, otypes=[object])(array).tolist() if array.size else array.tolist()
    return array.tolist()


def predict_response(outputs: dict[str, np.ndarray], row: bool) -> dict:
    """TF Serving's REST predict response for `outputs`."""
    values = {k: _json_value(k, v) for k, v in outputs.items()}
    if not row:
        return {"outputs": next(iter(values.values())) if len(values) == 1 else values}
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    n = len(next(iter(outputs.values())))
    return {"predictions": [{k: v[i] for k, v in values.items()} for i in range(n)]}


def error_body(message: str) -> dict:
    """TF Serving's REST error body."""
    return {"error": message}


def proto_json(message) -> dict:
    """A proto as TF Serving's REST API writes it: proto field names, defaults included
    (so `"error_code": "OK"` shows), int64 as strings."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)


def encode_json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=True).encode()


# ---- gRPC ------------------------------------------------------------------------------------

def from_tensor_proto(name: str, proto) -> np.ndarray:
    try:
        return tf.make_ndarray(proto)
    except (TypeError, ValueError) as e:
        raise invalid(f"Input '{name}' is not a valid TensorProto ({e}).") from None


def to_tensor_proto(array: np.ndarray):
    return tf.make_tensor_proto(array)
