"""TF Serving's Classify and Regress APIs (`tensorflow_serving/apis/classification.proto`, `regression.proto`)
over a SavedModel's signatures, as TF Serving runs them (`tensorflow_serving/servables/tensorflow/
classifier.cc`, `regressor.cc`, `util.cc`):

- the request's `Input` becomes a vector of serialized `tf.Example`s (`InputToSerializedExampleTensor`):
  an `ExampleList`, or an `ExampleListWithContext` whose context is serialized in front of each example
  (so an example's own feature wins over the context's); no example at all is "Input is empty.";
- the signature named in `model_spec.signature_name` runs, `serving_default` when none is named; it needs
  one input, `inputs`, and for Classify the outputs `classes` and/or `scores` (`[batch, num_classes]`,
  DT_STRING and DT_FLOAT), for Regress one output `outputs` (`[batch]` or `[batch, 1]`, DT_FLOAT)
  (`PreProcessClassification`, `PostProcessClassificationResult`, `PreProcessRegression`,
  `PostProcessRegressionResult`). Its method name is not checked, as by default in TF Serving
  (`--enable_signature_method_name_check` is off, so native TF2 signatures, all of method
  `tensorflow/serving/predict`, classify and regress too);
- `result.classifications[i].classes[j]` is `(classes[i, j], scores[i, j])`, every class in the model's order.

The REST form (`POST /v1/models/NAME:classify` and `:regress`, TF Serving's REST API "Classify and Regress
API"; `tensorflow_serving/util/json_tensor.cc`: `FillClassifyRegressRequestFromJson`,
`MakeJsonFromClassificationResult`, `MakeJsonFromRegressionResult`): `{"signature_name": ..., "context":
{feature: value}, "examples": [{feature: value}, ...]}` in, `{"results": [[[label, score], ...], ...]}` or
`{"results": [value, ...]}` out. A JSON string or `{"b64": ...}` is a `bytes_list` value, a number with a
fraction or exponent a `float_list` value, an integer or boolean an `int64_list` value (so a float model
refuses integer features, as in TF Serving).
"""

from __future__ import annotations

from math import prod

import numpy as np
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import classification_pb2, regression_pb2

from zoo.deploy.serve import codec
from zoo.deploy.serve.errors import ServingError, invalid
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE

CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
INPUTS, CLASSES, SCORES, OUTPUTS = "inputs", "classes", "scores", "outputs"


# ---- the request's examples (util.cc) -----------------------------------------------------------------------

def serialized_examples(input_proto) -> np.ndarray:
    """util.cc's `InputToSerializedExampleTensor`: one serialized `tf.Example` per example, the context's
    bytes in front of each (protobuf merges them: the example's own features win)."""
    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        found = [e.SerializeToString() for e in input_proto.example_list.examples]
    elif kind == "example_list_with_context":
        context = input_proto.example_list_with_context.context.SerializeToString()
        found = [context + e.SerializeToString() for e in input_proto.example_list_with_context.examples]
    else:
        found = []
    if not found:
        raise invalid("Input is empty.")
    return np.array(found, dtype=object)


def check_features(serialized: np.ndarray, servable) -> None:
    """Beyond TF Serving: each example has a feature per `serving_default` input of a zoo export (the
    inputs its classify signature parses), of the right list kind and length; INVALID_ARGUMENT naming
    the example and feature, instead of the graph's parse error. Only for models whose classify signature
    zoo wrote (`zoo.deploy.formats.tf_serving.CLASSIFY_SIGNATURE`)."""
    from zoo.deploy.formats.tf_serving import CLASSIFY_SIGNATURE

    spec = servable.signature_defs.get(SERVING_SIGNATURE)
    if spec is None or CLASSIFY_SIGNATURE not in servable.signature_defs:
        return
    found = [example_pb2.Example.FromString(s) for s in serialized]
    for name, info in spec.inputs.items():
        dims = [d.size for d in info.tensor_shape.dim][1:]
        count = prod(dims) if all(d >= 0 for d in dims) else None
        kind = ("bytes_list" if info.dtype == types_pb2.DT_STRING else "float_list"
                if info.dtype in (types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16)
                else "int64_list")
        for i, example in enumerate(found):
            feature = example.features.feature.get(name)
            if feature is None:
                raise invalid(f"Example {i} has no feature {name!r}, the model's input ({kind} of {count} values). "
                              f"Its features: {sorted(example.features.feature)}.")
            given = feature.WhichOneof("kind")
            if given != kind:
                raise invalid(f"Example {i}'s feature {name!r} is a {given}; the model's input takes a {kind}.")
            n = len(getattr(feature, kind).value)
            if count is not None and n != count:
                raise invalid(f"Example {i}'s feature {name!r} has {n} values; the model's input takes {count} "
                              f"(shape {dims}, flattened).")


# ---- signatures (classifier.cc, regressor.cc) -------------------------------------------------------------

def find_signature(servable, signature_name: str):
    """`GetClassificationSignatureDef` / `GetRegressionSignatureDef`: (key, SignatureDef)."""
    key = signature_name or SERVING_SIGNATURE
    if key not in servable.signature_defs:
        raise invalid(f"No signature was found with the name: {key}")
    return key, servable.signature_defs[key]


def _hint(servable, method: str) -> str:
    found = [k for k, s in servable.signature_defs.items() if s.method_name == method]
    return f" (signature {found[0]!r} of this model is one: name it in signature_name.)" if found else ""


def check_classification(servable, key: str, signature) -> list[str]:
    """classifier.cc's `PreProcessClassification` (no method name check): the outputs to read."""
    if len(signature.inputs) != 1:
        raise invalid("Expected one input Tensor." + _hint(servable, CLASSIFY_METHOD))
    if len(signature.outputs) not in (1, 2):
        raise invalid(f"Expected one or two output Tensors, found {len(signature.outputs)}"
                      + _hint(servable, CLASSIFY_METHOD))
    if INPUTS not in signature.inputs:
        raise invalid(f"No classification inputs found in SignatureDef: {signature}" + _hint(servable, CLASSIFY_METHOD))
    names = [k for k in (CLASSES, SCORES) if k in signature.outputs]
    if not names:
        raise invalid(f'Expected classification signature outputs to contain at least one of "{CLASSES}" or '
                      f'"{SCORES}". Signature was: {signature}')
    return names


def check_regression(servable, key: str, signature) -> list[str]:
    """regressor.cc's `PreProcessRegression` (no method name check)."""
    if len(signature.inputs) != 1:
        raise invalid("Expected one input Tensor." + _hint(servable, REGRESS_METHOD))
    if len(signature.outputs) != 1:
        raise invalid("Expected one output Tensor." + _hint(servable, REGRESS_METHOD))
    if INPUTS not in signature.inputs:
        raise invalid(f"No regression inputs found in SignatureDef: {signature}" + _hint(servable, REGRESS_METHOD))
    if OUTPUTS not in signature.outputs:
        raise invalid(f"No regression outputs found in SignatureDef: {signature}" + _hint(servable, REGRESS_METHOD))
    return [OUTPUTS]


def _shape(array) -> str:
    """`TensorShape::DebugString`."""
    return "[" + ",".join(str(d) for d in np.shape(array)) + "]"


def fill_classification(outputs: dict, num_examples: int, result) -> None:
    """classifier.cc's `PostProcessClassificationResult` into a `ClassificationResult`."""
    classes, scores = outputs.get(CLASSES), outputs.get(SCORES)
    for tensor, dtype, what in ((classes, "DT_STRING", "classes"), (scores, "DT_FLOAT", "scores")):
        if tensor is None:
            continue
        if np.ndim(tensor) != 2:
            raise invalid(f"Expected Tensor shape: [batch_size num_classes] but got {_shape(tensor)}")
        got = "DT_STRING" if tensor.dtype == object else types_pb2.DataType.Name(
            codec.tf.dtypes.as_dtype(tensor.dtype).as_datatype_enum)
        if got != dtype:
            raise invalid(f"Expected {what} Tensor of {dtype}. Got: {got}")
        if tensor.shape[0] != num_examples:
            raise invalid(f"Expected {what} output batch size of {num_examples}. Got: {tensor.shape[0]}")
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise invalid(f"Tensors class and score should match in dim_size(1). Got {classes.shape[1]} vs. "
                      f"{scores.shape[1]}")
    num_classes = (classes if classes is not None else scores).shape[1]
    for i in range(num_examples):
        entry = result.classifications.add()
        for j in range(num_classes):
            item = entry.classes.add()
            if classes is not None:
                item.label = classes[i][j].decode("utf-8", "replace") if isinstance(classes[i][j], bytes) \
                    else str(classes[i][j])
            if scores is not None:
                item.score = float(scores[i][j])


def fill_regression(outputs: dict, num_examples: int, result) -> None:
    """regressor.cc's `PostProcessRegressionResult` into a `RegressionResult`."""
    tensor = outputs[OUTPUTS]
    if not (np.ndim(tensor) == 1 or (np.ndim(tensor) == 2 and tensor.shape[1] == 1)):
        raise invalid(f"Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got "
                      f"{_shape(tensor)}")
    if tensor.shape[0] != num_examples:
        raise invalid(f"Input batch size did not match output batch size: {num_examples} vs. {tensor.shape[0]}")
    if tensor.dtype != np.float32:
        got = "DT_STRING" if tensor.dtype == object else types_pb2.DataType.Name(
            codec.tf.dtypes.as_dtype(tensor.dtype).as_datatype_enum)
        raise invalid(f"Expected output Tensor of DT_FLOAT.  Got: {got}")
    for value in np.ravel(tensor):
        result.regressions.add().value = float(value)


def run_examples(store, servable, key: str, serialized: np.ndarray) -> dict:
    """The signature on the serialized examples."""
    check_features(serialized, servable)
    return store.predict(servable, key, {INPUTS: serialized})


def _model_spec(response_spec, servable, signature_name: str) -> None:
    """util.cc's `MakeModelSpec`: the signature name, `serving_default` for none."""
    response_spec.name = servable.name
    response_spec.signature_name = signature_name or SERVING_SIGNATURE
    response_spec.version.value = servable.version


def classify(store, servable, request) -> classification_pb2.ClassificationResponse:
    """A `ClassificationRequest` on `servable` (classifier.cc: `RunClassify`)."""
    key, signature = find_signature(servable, request.model_spec.signature_name)
    names = check_classification(servable, key, signature)
    serialized = serialized_examples(request.input)
    outputs = run_examples(store, servable, key, serialized)
    response = classification_pb2.ClassificationResponse()
    _model_spec(response.model_spec, servable, request.model_spec.signature_name)
    fill_classification({k: outputs[k] for k in names}, len(serialized), response.result)
    return response


def regress(store, servable, request) -> regression_pb2.RegressionResponse:
    """A `RegressionRequest` on `servable` (regressor.cc: `RunRegress`)."""
    key, signature = find_signature(servable, request.model_spec.signature_name)
    check_regression(servable, key, signature)
    serialized = serialized_examples(request.input)
    outputs = run_examples(store, servable, key, serialized)
    response = regression_pb2.RegressionResponse()
    _model_spec(response.model_spec, servable, request.model_spec.signature_name)
    fill_regression(outputs, len(serialized), response.result)
    return response


# ---- REST (json_tensor.cc) -----------------------------------------------------------------------------------

def _add_value(feature, name: str, value) -> None:
    """json_tensor.cc's `AddValueToFeature`: one JSON value into the feature's list, whose kind the
    first value fixes."""
    kind = feature.WhichOneof("kind")

    def need(wanted: str, label: str):
        if kind is not None and kind != wanted:
            raise invalid(f"Unexpected element type in feature: {name} expecting type: "
                          f"{ {'bytes_list': 'bytes', 'float_list': 'float', 'int64_list': 'int64'}[kind] }")

    if value is None or isinstance(value, list) or (isinstance(value, dict) and not codec.is_b64(value)):
        raise invalid(f"Feature: {name} has element with unexpected JSON type: {codec._json_type(value)}")
    if isinstance(value, bool):
        need("int64_list", "int64")
        feature.int64_list.value.append(1 if value else 0)
    elif isinstance(value, dict):
        need("bytes_list", "bytes")
        feature.bytes_list.value.append(codec.decode_b64(value))
    elif isinstance(value, str):
        need("bytes_list", "bytes")
        feature.bytes_list.value.append(value.encode())
    elif isinstance(value, float):
        need("float_list", "float")
        feature.float_list.value.append(value)
    else:
        need("int64_list", "int64")
        if value > 2**63 - 1 and value <= 2**64 - 1:
            raise invalid(f"Feature: {name} has uint64_t element. Only int64_t is supported.")
        if not -2**63 <= value <= 2**63 - 1:
            raise invalid("JSON Parse error: Number too big to be stored in double.")
        feature.int64_list.value.append(value)


def _fill_example(example, value) -> None:
    """json_tensor.cc's `MakeExampleFromJsonObject`."""
    if not isinstance(value, dict):
        raise invalid(f"Example must be JSON object but got JSON {codec._json_type(value)}")
    for name, content in value.items():
        feature = feature_pb2.Feature()
        for v in content if isinstance(content, list) else [content]:
            _add_value(feature, name, v)
        example.features.feature[name].CopyFrom(feature)


def request_from_json(body: bytes, request, max_depth: int = 32):
    """A REST classify or regress body into `request` (a `ClassificationRequest` or `RegressionRequest`):
    json_tensor.cc's `FillClassifyRegressRequestFromJson`."""
    doc = codec.parse_json(body, max_depth)
    if "signature_name" in doc:
        request.model_spec.signature_name = codec.signature_name_of(doc)
    has_context = "context" in doc
    if has_context:
        _fill_example(request.input.example_list_with_context.context, doc["context"])
    if "examples" not in doc:
        raise invalid(f"JSON Value: {codec.debug_json(doc)} When method is classify, key 'examples' is expected "
                      "and was not found")
    examples = doc["examples"]
    if not isinstance(examples, list):
        raise invalid(f"JSON Value: {codec.debug_json(doc)} Expecting 'examples' value to be an list/array")
    if not examples:
        raise invalid(f"JSON Value: {codec.debug_json(doc)} 'examples' value is an empty array")
    for value in examples:
        target = request.input.example_list_with_context.examples if has_context else \
            request.input.example_list.examples
        _fill_example(target.add(), value)
    return request


def classification_json(result) -> bytes:
    """json_tensor.cc's `MakeJsonFromClassificationResult`."""
    if not result.classifications:
        raise invalid("Cannot convert empty ClassificationResults to JSON")
    rows = ("[" + ",".join("[" + codec.json.dumps(c.label) + "," + codec.float_token(c.score) + "]"
                           for c in row.classes) + "]" for row in result.classifications)
    return ('{"results":[' + ",".join(rows) + "]}").encode()


def regression_json(result) -> bytes:
    """json_tensor.cc's `MakeJsonFromRegressionResult`."""
    if not result.regressions:
        raise invalid("Cannot convert empty RegressionResults to JSON")
    values = np.array([r.value for r in result.regressions], np.float32)
    return ('{"results":[' + ",".join(codec._float_tokens(values)) + "]}").encode()


def method_error(method: str) -> ServingError:
    return ServingError("UNIMPLEMENTED", f"Unsupported signature method_name: {method}")
