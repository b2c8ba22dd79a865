"""TF Serving's Classify API (`tensorflow_serving/apis/classification.proto`) over a classify signature.

A classifier exported by zoo carries one (`zoo.deploy.formats.saved_model.classify_fn`): serialized
`tf.Example`s in (`inputs`), `classes` (the class names) and `scores` out, method name
`tensorflow/serving/classify`. This module answers a `ClassificationRequest` with it as TF Serving
does (`tensorflow_serving/servables/tensorflow/classifier.cc`, `util.cc`):

- the request's `Input` is an `ExampleList`, or an `ExampleListWithContext` whose context features
  are added to every example (an example's own feature wins over the context's);
- the signature named in `model_spec.signature_name` runs, `serving_default` when none is named, so
  clients name `classify`; a signature of another method is INVALID_ARGUMENT ("Expected
  classification signature method_name to be tensorflow/serving/classify. Was: ...");
- `result.classifications[i].classes[j]` is `(classes[i, j], scores[i, j])`, every class in the
  model's order (no sorting, as TF Serving).

The REST form (`POST /v1/models/NAME:classify`, TF Serving's REST API "Classify and Regress API"):
`{"signature_name": ..., "context": {feature: value}, "examples": [{feature: value}, ...]}` in,
`{"result": [[[label, score], ...], ...]}` out. A JSON value becomes a `bytes_list` (strings, `{"b64":
...}`), else a `float_list` or `int64_list`, as the model's input of that name takes it (TF Serving
infers int64 from integers, which a float model then refuses; pixels sent as integers just work here).
"""

from __future__ import annotations

import numpy as np
from tensorflow_serving.apis import classification_pb2

from zoo.deploy.serve.errors import invalid
from zoo.deploy.formats.tf_serving import CLASSIFY_INPUT, CLASSIFY_METHOD, SERVING_SIGNATURE


def examples(input_proto) -> list:
    """The request's `tf.Example`s, context features merged in."""
    from tensorflow.core.example import example_pb2

    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        examples = list(input_proto.example_list.examples)
    elif kind == "example_list_with_context":
        context = input_proto.example_list_with_context.context
        examples = []
        for example in input_proto.example_list_with_context.examples:
            merged = example_pb2.Example()
            merged.CopyFrom(context)
            for name, feature in example.features.feature.items():  # the example's own feature wins
                merged.features.feature[name].CopyFrom(feature)
            examples.append(merged)
    else:
        raise invalid("Input is empty: a ClassificationRequest needs input.example_list or "
                      "input.example_list_with_context.")
    if not examples:
        raise invalid("Input is empty: the request holds no examples.")
    return examples


def check_features(found: list, servable) -> None:
    """Each example has a feature per model input (the `serving_default` inputs the classify signature
    parses), of the right list kind and length; INVALID_ARGUMENT naming the example and feature otherwise,
    instead of the graph's "Graph execution error"."""
    from math import prod

    from tensorflow.core.framework import types_pb2

    spec = servable.signature_defs.get(SERVING_SIGNATURE)
    if spec is None:
        return
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


def check_signature(servable, signature_name: str):
    """The classify signature a request names; INVALID_ARGUMENT with TF Serving's words if it is no such
    signature, saying which signature of the model is."""
    key = signature_name or SERVING_SIGNATURE
    signature = servable.signature(key)
    if signature.method_name != CLASSIFY_METHOD:
        found = [k for k, s in servable.signature_defs.items() if s.method_name == CLASSIFY_METHOD]
        hint = (f" Name signature {found[0]!r} (model_spec.signature_name) for classification." if found else
                f" {servable.name} has no classify signature: it is exported with one when it has class names "
                "(zoo.deploy.export.export(..., class_names=[...])); use Predict meanwhile.")
        raise invalid(f"Expected classification signature method_name to be {CLASSIFY_METHOD}. Was: "
                      f"{signature.method_name}.{hint}")
    if CLASSIFY_INPUT not in signature.inputs:
        raise invalid(f"Classify signature {key!r} has no {CLASSIFY_INPUT!r} input of serialized examples.")
    return key


def classify(store, servable, request) -> classification_pb2.ClassificationResponse:
    """Runs `request` (a `ClassificationRequest`) on `servable` through `store` and builds the response."""
    key = check_signature(servable, request.model_spec.signature_name)
    found = examples(request.input)
    check_features(found, servable)
    serialized = np.array([e.SerializeToString() for e in found], dtype=object)
    outputs = store.predict(servable, key, {CLASSIFY_INPUT: serialized})
    response = classification_pb2.ClassificationResponse()
    response.model_spec.name = servable.name
    response.model_spec.version.value = servable.version
    response.model_spec.signature_name = key
    fill_result(outputs, response.result)
    return response


def fill_result(outputs: dict, result) -> None:
    """`classes` (bytes, [batch, k]) and `scores` ([batch, k]) into a `ClassificationResult`; either may be
    absent (TF Serving then leaves labels empty, or scores 0)."""
    classes, scores = outputs.get("classes"), outputs.get("scores")
    if classes is None and scores is None:
        raise invalid("The classify signature returned neither 'classes' nor 'scores'.")
    reference = scores if scores is not None else classes
    for i in range(len(reference)):
        entry = result.classifications.add()
        for j in range(reference.shape[1]):
            item = entry.classes.add()
            if classes is not None:
                label = classes[i][j]
                item.label = label.decode() if isinstance(label, bytes) else str(label)
            if scores is not None:
                item.score = float(scores[i][j])


def request_from_json(body: dict, name: str, servable) -> classification_pb2.ClassificationRequest:
    """A REST classify body (already parsed JSON) as a `ClassificationRequest` for model `name`."""
    if not isinstance(body, dict) or not isinstance(body.get("examples"), list):
        raise invalid('A classify request body is {"examples": [{feature: value, ...}, ...]} (optionally with '
                      '"signature_name" and "context").')
    unknown = sorted(set(body) - {"signature_name", "context", "examples"})
    if unknown:
        raise invalid(f"Unknown key(s) {unknown} in the classify request; expected signature_name, context, examples.")
    kinds = _input_kinds(servable)
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = body.get("signature_name") or ""
    if body.get("context") is not None:
        target = request.input.example_list_with_context
        _fill_example(target.context, body["context"], kinds, "context")
        for i, example in enumerate(body["examples"]):
            _fill_example(target.examples.add(), example, kinds, f"examples[{i}]")
    else:
        for i, example in enumerate(body["examples"]):
            _fill_example(request.input.example_list.examples.add(), example, kinds, f"examples[{i}]")
    return request


def result_json(response: classification_pb2.ClassificationResponse) -> dict:
    """TF Serving's REST classify answer: per example, `[label, score]` per class."""
    return {"result": [[[c.label, c.score] for c in row.classes] for row in response.result.classifications]}


def _input_kinds(servable) -> dict[str, str]:
    from tensorflow.core.framework import types_pb2

    spec = servable.signature_defs.get(SERVING_SIGNATURE)
    floating = (types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16)
    return {} if spec is None else {
        name: "bytes_list" if info.dtype == types_pb2.DT_STRING else "float_list" if info.dtype in floating
        else "int64_list" for name, info in spec.inputs.items()}


def _fill_example(example, features, kinds: dict, where: str) -> None:
    import base64
    import binascii

    if not isinstance(features, dict):
        raise invalid(f"{where} must be a JSON object of features. Received: {str(features)[:80]}")
    for name, value in features.items():
        leaves = _flatten(value)
        feature = example.features.feature[name]
        if any(isinstance(v, (str, dict)) for v in leaves):
            data = []
            for v in leaves:
                if isinstance(v, dict):
                    try:
                        data.append(base64.b64decode(v.get("b64", ""), validate=True))
                    except (binascii.Error, ValueError) as e:
                        raise invalid(f"{where}.{name}: invalid base64 value: {e}") from None
                elif isinstance(v, str):
                    data.append(v.encode())
                else:
                    raise invalid(f"{where}.{name} mixes strings and numbers.")
            feature.bytes_list.value.extend(data)
        elif not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in leaves):
            raise invalid(f"{where}.{name} holds a value that is neither a number nor a string.")
        elif kinds.get(name) == "float_list" or (name not in kinds and any(isinstance(v, float) for v in leaves)):
            feature.float_list.value.extend(float(v) for v in leaves)
        else:
            if any(isinstance(v, float) and not v.is_integer() for v in leaves):
                raise invalid(f"{where}.{name}: the model's input takes integers; received fractional values.")
            feature.int64_list.value.extend(int(v) for v in leaves)


def _flatten(value) -> list:
    out, todo = [], [value]
    while todo:
        v = todo.pop()
        if isinstance(v, list):
            todo += reversed(v)
        else:
            out.append(v)
    return out
