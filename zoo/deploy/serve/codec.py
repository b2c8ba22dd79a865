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

JSON values become tensors and tensors JSON as TF Serving's `tensorflow_serving/util/json_tensor.cc`
does, errors and their texts included (`FillPredictRequestFromJson`, `AddValueToTensor`,
`MakeJsonFromTensors`, `WriteDecimal`): a float input takes any JSON number (beyond float32 it becomes
infinity), an integer input JSON integers in its range, a string input strings and `{"b64": ...}`;
lists must be dense; floats are written with six significant digits, or nine (float) or seventeen
(double) where six do not read back as the same value. Beyond TF Serving (docs/serving.md lists it):
JSON nested deeper than the server's limit is refused before parsing, integers that fit int32 but not
an int8, int16 or uint8 input are refused instead of wrapped, non-finite inputs are refused unless the
server allows them, and non-finite outputs are reported (`non_finite_outputs`).
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
        if info.HasField("tensor_shape") and not info.tensor_shape.unknown_rank:
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
    if len(batch) > 1:  # beyond TF Serving, which leaves it to the model: batching needs one batch size
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


# ---- REST: JSON -> tensors (json_tensor.cc: FillPredictRequestFromJson) ----------------------------------

def tfs_type_name(enum: int) -> str:
    """TensorFlow's `DataTypeString`: "float", "int32", "string" (the names in TF Serving's messages)."""
    return types_pb2.DataType.Name(enum)[3:].lower()


def debug_json(value) -> str:
    """json_tensor.cc's `JsonValueToDebugString`: the value as JSON, cut at 256 bytes."""
    return json.dumps(value, allow_nan=True, default=repr)[:256]


def _json_type(value) -> str:
    """json_tensor.cc's `JsonTypeString`."""
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "True" if value else "False"
    return {dict: "Object", list: "Array", str: "String"}.get(type(value), "Number")


def type_error(value, dtype_enum: int) -> ServingError:
    return invalid(f"JSON Value: {debug_json(value)} Type: {_json_type(value)} is not of expected type: "
                   f"{tfs_type_name(dtype_enum)}")


def is_b64(value) -> bool:
    """json_tensor.cc's `IsValBase64Object`: an object whose only key is "b64", a string."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(B64), str)


def decode_b64(value) -> bytes:
    """json_tensor.cc's `JsonDecodeBase64Object` (absl::Base64Unescape also takes unpadded and URL-safe text)."""
    if not is_b64(value):
        raise invalid(f"JSON Value: {debug_json(value)} not formatted correctly for base64 data")
    text = value[B64].strip()
    try:
        if "-" in text or "_" in text:
            text = text.replace("-", "+").replace("_", "/")
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise invalid("Unable to base64 decode") from None


# The JSON integers each integer dtype takes (rapidjson's IsInt, IsInt64, IsUint, IsUint64 in AddValueToTensor).
_INT_RANGE = {types_pb2.DT_INT32: (-2**31, 2**31 - 1), types_pb2.DT_INT16: (-2**31, 2**31 - 1),
              types_pb2.DT_INT8: (-2**31, 2**31 - 1), types_pb2.DT_UINT8: (-2**31, 2**31 - 1),
              types_pb2.DT_INT64: (-2**63, 2**63 - 1), types_pb2.DT_UINT32: (0, 2**32 - 1),
              types_pb2.DT_UINT64: (0, 2**64 - 1)}
_FLOATS = (types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE)


def _check_leaf(value, dtype_enum: int) -> None:
    """json_tensor.cc's `AddValueToTensor` (and the object case of `FillTensorProto`) for one leaf."""
    if isinstance(value, dict):
        if dtype_enum == types_pb2.DT_STRING:
            decode_b64(value)
            return
        raise type_error(value, dtype_enum)
    if dtype_enum in _FLOATS:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif dtype_enum in _INT_RANGE:
        low, high = _INT_RANGE[dtype_enum]
        ok = type(value) is int and low <= value <= high
    elif dtype_enum == types_pb2.DT_STRING:
        ok = isinstance(value, str)
    elif dtype_enum == types_pb2.DT_BOOL:
        ok = isinstance(value, bool)
    else:
        raise ServingError("UNIMPLEMENTED", f"Conversion of JSON Value: {debug_json(value)} to type: "
                                            f"{tfs_type_name(dtype_enum)}")
    if not ok:
        raise type_error(value, dtype_enum)


def _dense_shape(value) -> list[int]:
    """json_tensor.cc's `GetDenseTensorShape`: the sizes along the first elements."""
    dims = []
    while isinstance(value, list):
        dims.append(len(value))
        if not value:
            break
        value = value[0]
    return dims


def _fill(value, dtype_enum: int) -> tuple[list[int], int]:
    """json_tensor.cc's `FillTensorProto` as a check: (shape, value count), or TF Serving's error."""
    dims = _dense_shape(value)
    rank, count = len(dims), 0
    todo = [(value, 0)]
    while todo:
        v, level = todo.pop()
        if not isinstance(v, list):
            if level != rank:
                raise invalid(f"JSON Value: {debug_json(v)} found at incorrect level: {level + 1} in the JSON DOM. "
                              f"Expected at level: {rank}")
            _check_leaf(v, dtype_enum)
            count += 1
            continue
        if level >= rank:
            raise invalid(f"Encountered list at unexpected level: {level} expected < {rank}")
        if len(v) != dims[level]:
            raise invalid(f"Encountered list at unexpected size: {len(v)} at level: {level} expected size: "
                          f"{dims[level]}")
        todo += [(c, level + 1) for c in reversed(v)]
    return dims, count


def _shape_text(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _status_text(e: ServingError) -> str:
    return f"{e.code}: {e.message}"


def _add_instance_item(item, name: str, infos, seen: dict) -> None:
    """json_tensor.cc's `AddInstanceItem`: one instance's value of input `name`, the same shape as the others'."""
    if name not in infos:
        raise invalid(f"JSON object: does not have named input: {name}")
    dims, size = _fill(item, infos[name].dtype)
    if name not in seen:
        seen[name] = (size, dims)
    elif seen[name][0] != size:
        raise invalid(f"Expecting tensor size: {seen[name][0]} but got: {size}")
    elif seen[name][1] != dims:
        raise invalid(f"Expecting shape {_shape_text(seen[name][1])} but got: {_shape_text(dims)}")


def _instances_error(instances: list, infos) -> None:
    """json_tensor.cc's `FillTensorMapFromInstancesList` as a check: raises TF Serving's error, if any."""
    if not isinstance(instances[0], dict) and len(infos) > 1:
        raise invalid("instances is a plain list, but expecting list of objects as multiple input tensors "
                      "required as per tensorinfo_map")

    def is_object(v):
        return isinstance(v, dict) and not is_b64(v)

    objects, names, seen = is_object(instances[0]), sorted(infos), {}
    for i, element in enumerate(instances):
        if objects:
            if not is_object(element):
                raise invalid(f"Expecting object but got list at item {i} of input list")
            for key, value in element.items():
                try:
                    _add_instance_item(value, key, infos, seen)
                except ServingError as e:
                    raise ServingError(e.code, f"Failed to process element: {i} key: {key} of 'instances' list. "
                                               f"Error: {_status_text(e)}") from None
            if sorted(element) != names:
                raise invalid(f"Failed to process element: {i} of 'instances' list. JSON object: "
                              f"{debug_json(element)} keys must be equal to: {','.join(names)}")
        else:
            if is_object(element):
                raise invalid(f"Expecting value/list but got object at item {i} of input list")
            try:
                _add_instance_item(element, names[0], infos, seen)
            except ServingError as e:
                raise ServingError(e.code, f"Failed to process element: {i} of 'instances' list. "
                                           f"Error: {_status_text(e)}") from None


def _decode_strings(value):
    if isinstance(value, list):
        return [_decode_strings(v) for v in value]
    return decode_b64(value) if isinstance(value, dict) else value.encode() if isinstance(value, str) else value


def _to_array(value, name: str, info) -> np.ndarray:
    """A JSON value (already checked by `_fill`) as an array of the signature's dtype."""
    dtype = tf.dtypes.as_dtype(info.dtype)
    if dtype == tf.string:
        array = np.empty(_dense_shape(value), dtype=object)
        flat = _decode_strings(value)
        if array.ndim == 0:
            array[()] = flat
        elif array.size:
            array[...] = np.array(flat, dtype=object).reshape(array.shape) if array.ndim > 1 else flat
        return array
    with np.errstate(over="ignore"):  # json_tensor.cc: GetFloat() of a double beyond float32 is +-inf
        if dtype.is_floating:
            try:
                return np.array(value, dtype=np.float64).astype(dtype.as_numpy_dtype)
            except OverflowError:  # an integer beyond double range: rapidjson refuses it while parsing
                raise invalid("JSON Parse error: Number too big to be stored in double.") from None
        array = np.array(value, dtype=object if dtype.is_integer else None)
        _check_range(name, array, dtype)
        return array.astype(dtype.as_numpy_dtype)


def _check_range(name: str, array: np.ndarray, dtype) -> None:
    """Beyond TF Serving: a JSON integer that fits int32 but not int8, int16 or uint8 is refused here; TF
    Serving stores it in `int_val` and the cast to the narrow type wraps it (300 becomes 44 for int8)."""
    if not array.size or not dtype.is_integer:
        return
    info = np.iinfo(dtype.as_numpy_dtype)
    low, high = min(array.flat), max(array.flat)
    if low < info.min or high > info.max:
        worst = low if low < info.min else high
        raise invalid(f"Input '{name}': JSON value {worst} is out of range for {tfs_type_name(dtype.as_datatype_enum)} "
                      f"[{info.min}, {info.max}] (zoo refuses it; TF Serving would wrap it around).")


def _fast_array(value, info, booleans: bool = True):
    """The array of a numeric JSON value when every leaf is of the right JSON type and the lists are dense,
    else None (then `_fill` finds TF Serving's error). Numpy does the work; booleans and strings among
    numbers show in its dtype."""
    enum = info.dtype
    if enum not in _FLOATS and enum not in _INT_RANGE and enum != types_pb2.DT_BOOL:
        return None
    if booleans and enum != types_pb2.DT_BOOL:  # numpy turns [true, 1.5] into floats silently
        return None
    try:
        array = np.array(value)
    except (ValueError, TypeError, OverflowError):
        return None
    kind = array.dtype.kind
    if enum == types_pb2.DT_BOOL:
        return array if kind == "b" else None
    if enum in _FLOATS:
        if kind not in "iuf":
            return None
        with np.errstate(over="ignore"):
            return array.astype(tf.dtypes.as_dtype(enum).as_numpy_dtype)
    if kind not in "iu":
        return None
    target = tf.dtypes.as_dtype(enum).as_numpy_dtype
    info = np.iinfo(target)  # narrower than TF Serving's range for int8, int16, uint8: `_check_range` says why
    if array.size and (int(array.min()) < info.min or int(array.max()) > info.max):
        return None
    return array.astype(target)


# JSON strings, with escapes (removed before counting brackets).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _check_depth(stripped: bytes, max_depth: int) -> None:
    """Refuses JSON nested deeper than `max_depth` before it is parsed: Python's parser recurses,
    so deep nesting would end in RecursionError (a 500) instead of a 400. TF Serving's parser
    (rapidjson, iterative) has no such limit."""
    brackets = stripped.translate(None, _NOT_BRACKETS)
    if len(brackets) <= max_depth:
        return
    steps = np.frombuffer(brackets, np.uint8)
    depth = np.cumsum(np.where((steps == ord("[")) | (steps == ord("{")), 1, -1), dtype=np.int64)
    if depth.size and depth.max() > max_depth:
        raise invalid(f"JSON nesting depth {int(depth.max())} exceeds the limit of {max_depth} "
                      "(nested arrays deeper than any input's rank).")


def check_json_depth(body: bytes, max_depth: int) -> None:
    """`_check_depth` of a raw JSON body (its strings blanked first)."""
    _check_depth(_STRING.sub(b'""', body), max_depth)


# Python's json messages as rapidjson's (rapidjson/error/en.h), which TF Serving quotes.
_PARSE_ERRORS = {
    "Expecting value": "Invalid value.",
    "Expecting property name enclosed in double quotes": "Missing a name for object member.",
    "Expecting ':' delimiter": "Missing a colon after a name of object member.",
    "Expecting ',' delimiter": "Missing a comma or ']' after an array element.",
    "Unterminated string starting at": "Missing a closing quotation mark in string.",
    "Invalid control character at": "Invalid encoding in string.",
    "Invalid \\escape": "Invalid escape character in string.",
    "Invalid \\uXXXX escape": "Incorrect hex digit after \\u escape in string.",
}


def parse_json(body: bytes, max_depth: int = 32):
    """json_tensor.cc's `ParseJson`: the document, which must be an object; like rapidjson with
    kParseStopWhenDoneFlag, whatever follows the first JSON value is ignored."""
    check_json_depth(body, max_depth)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise invalid(f"JSON Parse error: Invalid encoding in string. at offset: {e.start}") from None
    start = len(text) - len(text.lstrip(" \t\n\r"))
    if start == len(text):
        raise invalid("JSON Parse error: The document is empty")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as e:
        message = next((v for k, v in _PARSE_ERRORS.items() if e.msg.startswith(k)), e.msg + ".")
        raise invalid(f"JSON Parse error: {message} at offset: {e.pos}") from None
    except RecursionError:  # only if max_depth is set above Python's recursion limit
        raise invalid("JSON Parse error: nested too deeply.") from None
    if not isinstance(doc, dict):
        raise invalid(f"JSON Value: {debug_json(doc)} Is not object")
    return doc


def signature_name_of(doc: dict) -> str:
    """json_tensor.cc's `FillSignature`."""
    name = doc.get("signature_name", "")
    if not isinstance(name, str):
        raise invalid(f"JSON Value: {debug_json(doc)} not formatted correctly. 'signature_name' key must be a "
                      "string value.")
    return name


def parse_predict_body(body: bytes, signature_for, *, max_depth: int = 32,
                       allow_non_finite: bool = False) -> tuple[str, dict[str, np.ndarray], bool]:
    """A REST predict body -> (signature_name, `{input_name: array}`, row_format): `parse_predict_json`,
    then `check_inputs` against the signature.

    `signature_for(signature_name)` returns the `SignatureDef` the inputs are checked against.
    """
    signature_name, arrays, row = parse_predict_json(body, signature_for, max_depth=max_depth)
    return signature_name, check_inputs(arrays, signature_for(signature_name), allow_non_finite=allow_non_finite), row


def parse_predict_json(body: bytes, signature_for, *, max_depth: int = 32) -> tuple[str, dict[str, np.ndarray], bool]:
    """The tensors of a REST predict body, with TF Serving's errors (json_tensor.cc: `FillPredictRequestFromJson`);
    only the input dtypes of the signature are used, as there."""
    doc = parse_json(body, max_depth)
    booleans = b"true" in body or b"false" in body  # only then can a boolean hide among numbers
    signature_name = signature_name_of(doc)
    signature = signature_for(signature_name)
    infos = signature.inputs
    if not infos:
        raise invalid(f"Failed to get input map for signature: {signature_name or 'DEFAULT'}")
    names = sorted(infos)
    if "instances" in doc:
        if "inputs" in doc:
            raise invalid(f"JSON Value: {debug_json(doc)} Not formatted correctly expecting only one of 'inputs' or "
                          "'instances' keys to exist ")
        instances = doc["instances"]
        if not isinstance(instances, list):
            raise invalid(f"JSON Value: {debug_json(doc)} Expecting 'instances' to be an list/array")
        if not instances:
            raise invalid(f"JSON Value: {debug_json(doc)} No values in 'instances' array")
        objects = isinstance(instances[0], dict) and not is_b64(instances[0])
        if objects:
            columns = {k: [i.get(k) if isinstance(i, dict) else None for i in instances] for k in names}
            well_formed = all(isinstance(i, dict) and not is_b64(i) and sorted(i) == names for i in instances)
        else:
            columns = {names[0]: instances}
            well_formed = len(names) == 1 and not any(isinstance(i, dict) and not is_b64(i) for i in instances)
        arrays = {k: _fast_array(v, infos[k], booleans) for k, v in columns.items()} if well_formed else {}
        if not arrays or any(a is None for a in arrays.values()):
            _instances_error(instances, infos)  # TF Serving's error, if it has one
            arrays = {k: _to_array(v, k, infos[k]) for k, v in columns.items()}
        row = True
    elif "inputs" in doc:
        value = doc["inputs"]
        if not isinstance(value, dict) or is_b64(value):
            if len(names) > 1:
                raise invalid("inputs is a plain value/list, but expecting an object as multiple input tensors "
                              "required as per tensorinfo_map")
            columns = {names[0]: value}
        else:
            for name in names:  # keys beyond the signature's inputs are ignored, as in TF Serving
                if name not in value:
                    raise invalid(f"Missing named input: {name} in 'inputs' object.")
            columns = {name: value[name] for name in names}
        arrays = {}
        for k, v in columns.items():
            array = _fast_array(v, infos[k], booleans)
            if array is None:
                _fill(v, infos[k].dtype)
                array = _to_array(v, k, infos[k])
            arrays[k] = array
        row = False
    else:
        raise invalid("Missing 'inputs' or 'instances' key")
    return signature_name, arrays, row


# ---- REST: tensors -> JSON (json_tensor.cc: MakeJsonFromTensors, WriteDecimal) -------------------------------

def _float_tokens(array: np.ndarray) -> list[str]:
    """json_tensor.cc's `WriteDecimal`: `absl::StrCat` (printf "%g", six digits) if that reads back as the
    same value, else max_digits10 digits (9 for float, 17 for double); ".0" after whole numbers written
    without exponent; NaN, Infinity and -Infinity as bare tokens."""
    flat = array.ravel()
    if not flat.size:
        return []
    wide = flat.astype(np.float64)
    finite = np.isfinite(wide)
    short = np.char.mod("%.6g", np.where(finite, wide, 0.0))
    back = short.astype(np.float64).astype(flat.dtype)
    redo = finite & (back != flat)
    if redo.any():
        digits = 9 if flat.dtype == np.float32 else 17
        short = short.astype(object)
        short[redo] = np.char.mod(f"%.{digits}g", wide[redo])
        short = short.astype(str)
    plain = (np.char.find(short, ".") < 0) & (np.char.find(short, "e") < 0)
    tokens = np.where(plain, np.char.add(short, ".0"), short).astype(object)
    if not finite.all():
        tokens[np.isnan(wide)] = "NaN"
        tokens[np.isposinf(wide)] = "Infinity"
        tokens[np.isneginf(wide)] = "-Infinity"
    return tokens.tolist()


def _tokens(name: str, array: np.ndarray) -> list[str]:
    """The JSON token of every value of an output, as json_tensor.cc's `AddSingleValueAndAdvance` writes it."""
    kind = array.dtype.kind
    if array.dtype in (np.float32, np.float64):
        return _float_tokens(array)
    if kind in "iu" and array.dtype.itemsize <= 8 and array.dtype != np.uint16:
        return [str(v) for v in array.ravel().tolist()]
    if kind == "b":
        return ["true" if v else "false" for v in array.ravel().tolist()]
    if kind in "OS":
        if name.endswith(BYTES_SUFFIX):
            return ['{"b64":"' + base64.b64encode(v).decode() + '"}' for v in array.ravel().tolist()]
        return [json.dumps(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))
                for v in array.ravel().tolist()]
    raise invalid(f"Failed to write JSON value for tensor type: {tfs_type_name(tf.dtypes.as_dtype(array.dtype).as_datatype_enum)}")


def _nest(tokens: list[str], shape: tuple) -> str:
    if not shape:
        return tokens[0]
    if len(shape) == 1:
        return "[" + ",".join(tokens) + "]"
    step = math.prod(shape[1:])
    return "[" + ",".join(_nest(tokens[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def tensor_json(name: str, array) -> str:
    """One output as JSON text."""
    array = np.asarray(array, dtype=object) if isinstance(array, bytes) else np.asarray(array)
    return _nest(_tokens(name, array), array.shape)


BYTES_SUFFIX = "_bytes"


def predict_response(outputs: dict[str, np.ndarray], row: bool, extra: dict | None = None) -> bytes:
    """TF Serving's REST predict response for `outputs` as JSON text (json_tensor.cc: `MakeJsonFromTensors`),
    then the `extra` keys."""
    if not outputs:
        raise invalid("Cannot convert empty tensor map to JSON")
    outputs = {k: np.asarray(v, dtype=object) if isinstance(v, bytes) else np.asarray(v) for k, v in outputs.items()}
    names = sorted(outputs)
    if not row:
        if len(names) == 1:
            text = '{"outputs":' + tensor_json(names[0], outputs[names[0]])
        else:
            text = '{"outputs":{' + ",".join(json.dumps(k) + ":" + tensor_json(k, outputs[k]) for k in names) + "}"
    else:
        batch = None
        for k in names:
            value = outputs[k]
            if value.ndim == 0:
                raise invalid(f"Tensor name: {k} has no shape information ")
            if batch is not None and value.shape[0] != batch:
                raise invalid(f"Tensor name: {k} has inconsistent batch size: {value.shape[0]} expecting: {batch}")
            batch = value.shape[0]
        if len(names) == 1:
            text = '{"predictions":' + tensor_json(names[0], outputs[names[0]])
        else:
            items = [_tokens(k, outputs[k]) for k in names]
            per = [math.prod(outputs[k].shape[1:]) for k in names]
            text = '{"predictions":[' + ",".join(
                "{" + ",".join(json.dumps(k) + ":" + _nest(tokens[i * n:(i + 1) * n], outputs[k].shape[1:])
                               for k, tokens, n in zip(names, items, per)) + "}"
                for i in range(batch)) + "]"
    for key, value in (extra or {}).items():
        text += "," + json.dumps(key) + ":" + json.dumps(value, allow_nan=True)
    return (text + "}").encode()


def float_token(value: float) -> str:
    """One float32 as `WriteDecimal<float>` writes it (classification scores, regression values)."""
    return _float_tokens(np.array([value], np.float32))[0]


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
