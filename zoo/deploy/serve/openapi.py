"""TF Serving's REST API as an OpenAPI 3 description, served at `/v1/openapi.json`.

The API is TF Serving's (https://www.tensorflow.org/tfx/serving/api_rest); this
description is what a client generator or a schema-driven fuzzer (schemathesis, as in
`benchmarks/serving_fuzz.py`) reads. Every error response is `{"error": "..."}`.
"""

from __future__ import annotations

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}},
          "additionalProperties": False}
_ERRORS = {
    "400": "Malformed request, wrong input names, types, shapes, non-finite or lossy values, nesting too deep",
    "404": "No such model, version or path",
    "405": "Method not allowed",
    "413": "Request body over the size limit",
    "429": "The server is at capacity (concurrency and queue limits); retry with backoff",
    "501": "A dtype JSON cannot carry (use gRPC), or an unsupported method",
    "504": "The request's deadline passed while it waited or ran",
}
_NAME = {"name": "model_name", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[^/:]+$"}}
_VERSION = {"name": "version", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}
_LABEL = {"name": "label", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[^/:]+$"}}
_PREDICT_BODY = {
    "type": "object",
    "properties": {
        "signature_name": {"type": "string"},
        "instances": {"type": "array", "minItems": 1, "description": "row format: one element per example"},
        "inputs": {"description": "columnar format: a tensor, or an object of tensors by input name"},
    },
}
_EXAMPLES_BODY = {
    "type": "object",
    "required": ["examples"],
    "properties": {
        "signature_name": {"type": "string"},
        "context": {"type": "object", "description": "features added to every example"},
        "examples": {"type": "array", "minItems": 1, "items": {"type": "object"},
                     "description": "one tf.Example per element: feature name -> value or flat list"},
    },
}
_RESULTS_OK = {"type": "object", "required": ["results"], "properties": {"results": {"type": "array"}}}
_PREDICT_OK = {
    "type": "object",
    "properties": {"predictions": {}, "outputs": {},
                   "warnings": {"type": "array", "items": {"type": "string"},
                                "description": "present when outputs hold NaN or Infinity"}},
}


def _responses(ok_schema: dict, codes) -> dict:
    out = {"200": {"description": "OK", "content": {"application/json": {"schema": ok_schema}}}}
    for code in codes:
        out[code] = {"description": _ERRORS[code], "content": {"application/json": {"schema": _ERROR}}}
    return out


def openapi_spec() -> dict:
    """The OpenAPI 3.0 document of the REST API."""
    paths = {}
    for suffix, params in (("", [_NAME]), ("/versions/{version}", [_NAME, _VERSION]),
                           ("/labels/{label}", [_NAME, _LABEL])):
        base = "/v1/models/{model_name}" + suffix
        paths[base] = {"get": {"summary": "Model status (GetModelStatusResponse as JSON)", "parameters": params,
                               "responses": _responses({"type": "object"}, ("400", "404"))}}
        paths[base + "/metadata"] = {"get": {"summary": "Signature defs (GetModelMetadataResponse as JSON)",
                                             "parameters": params,
                                             "responses": _responses({"type": "object"}, ("400", "404"))}}
        paths[base + ":predict"] = {"post": {
            "summary": "Predict (row format `instances` or columnar `inputs`)", "parameters": params,
            "requestBody": {"required": True, "content": {"application/json": {"schema": _PREDICT_BODY}}},
            "responses": _responses(_PREDICT_OK, ("400", "404", "413", "429", "504"))}}
        for verb, what in (("classify", "Classify: [[label, score], ...] per example"),
                           ("regress", "Regress: one value per example")):
            paths[base + ":" + verb] = {"post": {
                "summary": what, "parameters": params,
                "requestBody": {"required": True, "content": {"application/json": {"schema": _EXAMPLES_BODY}}},
                "responses": _responses(_RESULTS_OK, ("400", "404", "413", "429", "504"))}}
    paths["/v1/openapi.json"] = {"get": {"summary": "This document", "responses": {
        "200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "zoo serve: TF Serving REST API", "version": "1",
                 "description": "TF Serving's REST API (tensorflow.org/tfx/serving/api_rest) served by zoo serve."},
        "paths": paths,
    }
