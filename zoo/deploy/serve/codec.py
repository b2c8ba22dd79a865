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

JSON values are typed as strictly as TF Serving types them (`tensorflow_serving/util/
json_tensor.cc: AddValueToTensor, IsLosslessDecimal`): a float input takes JSON numbers
but not `true`, an integer input takes JSON integers but not `1.5`, `1.0` or `"1"`, and a
number a float32 cannot hold (`1e308`) is refused instead of becoming infinity. Beyond
TF Serving, integers out of the input's range are refused (numpy would wrap them),
non-finite inputs are refused unless the server allows them, and non-finite outputs
are reported (`non_finite_outputs`).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.framework import types_pb2

from zoo.deploy.serve.errors import ServingError, invalid

B64 = "b64"


# ---- signature checks (shared by REST and gRPC) ---------------------------------------------

def _dtype_name(enum: int) -> str:
    return types_pb2.DataType.Name(enum)


def check_inputs(inputs: dict[str, np.ndarray], signature, *, allow_non_finite: bool = True) -> dict[str, np.ndarray]:
    """Validates names, dtypes, shapes and (unless allowed) finiteness against `signature` (a
    `SignatureDef`); returns the inputs."""
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
        if not allow_non_finite and value.dtype.kind in "fc":
            bad = ~np.isfinite(value)
            if bad.any():
                first = [int(i) for i in np.argwhere(bad)[0]]
                raise invalid(f"Input '{name}' holds {int(bad.sum())} non-finite values (NaN or Infinity), the first "
                              f"at index {first}. The server refuses them (zoo serve --allow-non-finite-inputs "
                              "accepts them).")
    batch = {v.shape[0] for v in inputs.values() if v.ndim}
    if len(batch) > 1:
        raise invalid(f"Inputs have different batch sizes: {sorted(batch)}.")
    return inputs


def non_finite_outputs(outputs: dict[str, np.ndarray]) -> list[str]:
    """One warning per float output holding NaN or Infinity (the model overflowed or divided by zero)."""
    notes = []
    for name, value in outputs.items():
        if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
            bad = int(np.count_nonzero(~np.isfinite(value)))
            if bad:
                notes.append(f"Output '{name}' holds {bad} non-finite values (NaN or Infinity) of {value.size}: "
                             "the model overflowed or divided by zero on these inputs.")
    return notes


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


_JSON_TYPE = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", list: "array",
              type(None): "null"}


_NONE = object()


def _first_offender(value, ok):
    """The first leaf of nested lists for which `ok(leaf)` is False, else `_NONE` (iterative)."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, list):
            todo += reversed(v)
        elif not ok(v):
            return v
    return _NONE


def _type_error(name: str, value, dtype) -> Exception:
    shown = repr(value)[:80] if isinstance(value, bytes) else json.dumps(value, allow_nan=True, default=repr)[:80]
    return invalid(f"Input '{name}': JSON value {shown} (a JSON {_JSON_TYPE.get(type(value), type(value).__name__)}) "
                   f"is not of expected type {dtype.name}.")


def _check_range(name: str, value, array: np.ndarray, dtype) -> None:
    """Refuses numbers the input's dtype cannot hold: json_tensor.cc's IsLosslessDecimal for floats
    (finite values within range; JSON integers up to 2**mantissa - 1), the dtype's range for integers."""
    target = np.dtype(dtype.as_numpy_dtype)
    if not array.size:
        return
    if target.kind == "f":
        info = np.finfo(target)
        limit = 2 ** (info.nmant + 1) - 1
        finite = np.abs(array[np.isfinite(array)]) if array.dtype.kind == "f" else np.abs(array)
        if finite.size and finite.max() > limit:  # rare: only then look for the JSON integers among the values
            big = _first_offender(value, lambda v: not (type(v) is int and abs(v) > limit))
            if big is not _NONE:
                raise invalid(f"Input '{name}': cannot convert JSON value {big} to {dtype.name} without loss "
                              f"of precision (integers up to {limit}).")
            if array.dtype.kind == "f" and finite.max() > info.max:
                worst = float(finite.max())
                raise invalid(f"Input '{name}': cannot convert JSON value {worst!r} to {dtype.name} without "
                              f"loss of precision (it overflows: the largest {dtype.name} is {float(info.max):.7g}).")
    elif target.kind in "iu":
        info = np.iinfo(target)
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            worst = low if low < info.min else high
            raise invalid(f"Input '{name}': JSON value {worst} is out of range for {dtype.name} "
                          f"[{info.min}, {info.max}].")


def _to_array(value, name: str, info, booleans_possible: bool = True) -> np.ndarray:
    """A JSON value as an array of the signature's dtype, typed as TF Serving types it (module docstring).

    `booleans_possible`: the body holds a `true` or `false` token somewhere; only then is every leaf
    of a numeric input checked for booleans (numpy turns `[true, 1.5]` into floats silently).
    """
    dtype = tf.dtypes.as_dtype(info.dtype)
    value = _decode_b64(value)
    if dtype == tf.string:
        bad = _first_offender(value, lambda v: isinstance(v, (str, bytes)))
        if bad is not _NONE:
            raise _type_error(name, bad, dtype)
        try:
            array = np.array(value, dtype=object)
        except ValueError as e:
            raise invalid(f"Input '{name}' is not a dense tensor: {str(e).splitlines()[0].rstrip('.')}.") from None
        if any(isinstance(v, list) for v in array.flat):
            raise invalid(f"Input '{name}' is not a dense tensor: its nested lists have different lengths.")
        return np.vectorize(lambda v: v.encode() if isinstance(v, str) else v, otypes=[object])(array) \
            if array.size else array
    if not (dtype.is_floating or dtype.is_integer or dtype == tf.bool) or dtype.is_complex:
        raise ServingError("UNIMPLEMENTED", f"Input '{name}' has dtype {dtype.name}, which JSON cannot carry; use gRPC.")
    if dtype == tf.bool:
        allowed, kinds = (bool,), "b"
    elif dtype.is_integer:
        allowed, kinds = (int,), "iu"
    else:
        allowed, kinds = (int, float), "iuf"

    def ok(v):
        return type(v) in allowed

    try:
        array = np.array(value)
    except (ValueError, TypeError, OverflowError) as e:  # ragged lists
        raise invalid(f"Input '{name}' is not a dense tensor: {str(e).splitlines()[0].rstrip('.')}.") from None
    if array.dtype.kind not in kinds or (booleans_possible and dtype != tf.bool and array.dtype.kind != "b"):
        bad = _first_offender(value, ok)
        if bad is not _NONE:
            raise _type_error(name, bad, dtype)
        if array.dtype.kind not in kinds:  # integers beyond 64 bits, which numpy keeps as objects
            raise invalid(f"Input '{name}' holds integers beyond 64 bits, out of range for {dtype.name}.")
    _check_range(name, value, array, dtype)
    return array.astype(dtype.as_numpy_dtype)


# JSON strings, with escapes (removed before counting brackets and looking for true/false).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _check_depth(stripped: bytes, max_depth: int) -> None:
    """Refuses JSON nested deeper than `max_depth` before it is parsed: Python's parser recurses,
    so deep nesting would end in RecursionError (a 500) instead of a 400."""
    brackets = stripped.translate(None, _NOT_BRACKETS)
    if len(brackets) <= max_depth:
        return
    steps = np.frombuffer(brackets, np.uint8)
    depth = np.cumsum(np.where((steps == ord("[")) | (steps == ord("{")), 1, -1), dtype=np.int64)
    if depth.size and depth.max() > max_depth:
        raise invalid(f"JSON nesting depth {int(depth.max())} exceeds the limit of {max_depth} "
                      "(nested arrays deeper than any input's rank).")


def check_json_depth(body: bytes, max_depth: int) -> None:
    """`_check_depth` of a raw JSON body (its strings blanked first): for bodies other than predict's."""
    _check_depth(_STRING.sub(b'""', body), max_depth)


def parse_predict_body(body: bytes, signature_for, *, max_depth: int = 32,
                       allow_non_finite: bool = False) -> tuple[str, dict[str, np.ndarray], bool]:
    """A REST predict body -> (signature_name, `{input_name: array}`, row_format).

    `signature_for(signature_name)` returns the `SignatureDef` the inputs are checked against.
    """
    stripped = _STRING.sub(b'""', body)
    _check_depth(stripped, max_depth)
    booleans_possible = b"true" in stripped or b"false" in stripped
    try:
        request = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise invalid(f"JSON Parse error: {e}") from None
    except RecursionError:  # only if max_depth is set above Python's recursion limit
        raise invalid("JSON Parse error: nested too deeply.") from None
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
    arrays = {k: _to_array(v, k, signature.inputs[k], booleans_possible) for k, v in columns.items()}
    return signature_name, check_inputs(arrays, signature, allow_non_finite=allow_non_finite), row


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

def from_tensor_proto(name: str, proto, max_bytes: int | None = None) -> np.ndarray:
    """The array of a TensorProto; RESOURCE_EXHAUSTED if it would decode to more than `max_bytes`
    (a TensorProto may state a large shape and one value, which fills the whole tensor)."""
    try:
        dtype = tf.dtypes.as_dtype(proto.dtype)
        itemsize = 8 if dtype == tf.string else np.dtype(dtype.as_numpy_dtype).itemsize
    except (TypeError, KeyError) as e:  # KeyError: reference dtypes (DT_FLOAT_REF, ...) have no numpy type
        raise invalid(f"Input '{name}' has an unsupported dtype ({e}).") from None
    dims = [d.size for d in proto.tensor_shape.dim]
    if proto.tensor_shape.unknown_rank or any(d < 0 for d in dims):
        raise invalid(f"Input '{name}' has shape {dims or '(unknown rank)'}; a request tensor needs a known shape.")
    size = math.prod(dims) * itemsize
    if max_bytes is not None and size > max_bytes:
        raise ServingError("RESOURCE_EXHAUSTED", f"Input '{name}' of shape {dims} decodes to {size} bytes, over "
                                                 f"the limit of {max_bytes} bytes.")
    try:
        return tf.make_ndarray(proto)
    except (TypeError, ValueError, IndexError) as e:
        raise invalid(f"Input '{name}' is not a valid TensorProto ({e}).") from None


def to_tensor_proto(array: np.ndarray):
    return tf.make_tensor_proto(array)
