"""TF Serving's REST API (https://www.tensorflow.org/tfx/serving/api_rest) as a Starlette app.

    GET  /v1/models/NAME[/versions/N | /labels/L]            model status
    GET  /v1/models/NAME[/versions/N | /labels/L]/metadata   signature defs
    POST /v1/models/NAME[/versions/N | /labels/L]:predict    prediction
    POST /v1/models/NAME[/versions/N | /labels/L]:classify   classification (a classify signature; classify.py)

    GET  /v1/openapi.json                                    this API as OpenAPI 3 (openapi.py)

Status and metadata bodies are the JSON forms of TF Serving's protos
(`GetModelStatusResponse`, `GetModelMetadataResponse`), as TF Serving's
`http_rest_api_handler.cc` writes them; errors are `{"error": "..."}` with the
HTTP status of the canonical code (`errors.HTTP_STATUS`), every one of them: a body
over the size limit is 413, a full queue 429, a passed deadline 504 (`limits.py`).
A predict response whose outputs hold NaN or Infinity carries a `"warnings"` list
next to the predictions (TF Serving sends them silently).
"""

from __future__ import annotations

import json
import logging
import re
import time

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from zoo.deploy.serve import classify, codec
from zoo.deploy.serve.errors import ServingError, invalid, runtime_error
from zoo.deploy.serve.limits import Admission, Limits
from zoo.deploy.serve.metadata import metadata_json, metadata_response
from zoo.deploy.serve.openapi import openapi_spec
from zoo.deploy.serve.store import ModelStore

log = logging.getLogger("zoo.serving")

# tensorflow_serving/model_servers/http_rest_api_handler.cc: kPathRegex.
_PATH = re.compile(r"^(?P<name>[^/:]+)(?:/versions/(?P<version>\d+)|/labels/(?P<label>[^/:]+))?"
                   r"(?P<verb>/metadata|:predict|:classify|:regress)?$")


def _json(obj, status: int = 200) -> Response:
    return Response(codec.encode_json(obj), status_code=status, media_type="application/json")


def _error(e: ServingError) -> Response:
    return _json(codec.error_body(e.message), e.http_status)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, or RESOURCE_EXHAUSTED past `limit` bytes. An oversized body is read to its end but
    not kept: a server that answers and closes mid-upload resets the connection, and the client
    would see a broken pipe instead of the error."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
        else:
            chunks.clear()
    if size > limit:
        raise _too_large(size, limit)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> ServingError:
    # HTTP 413, the status for a body the server will not read; the code is gRPC's for the same case.
    return ServingError("RESOURCE_EXHAUSTED", f"Request body of {size} bytes exceeds the limit of {limit} bytes.",
                        http_status=413)


def create_app(store: ModelStore, limits: Limits | None = None, admission: Admission | None = None) -> Starlette:
    """The REST app over `store`; predictions run in worker threads, off the event loop, within `admission`."""
    limits = limits or Limits()
    admission = admission or Admission(limits.max_concurrent_requests, limits.max_queued_requests)
    # One thread per admitted request, so a request admitted to the queue never waits for a thread instead.
    threads = anyio.CapacityLimiter(admission.capacity)
    spec = openapi_spec()

    def predict(servable, body: bytes, ticket, deadline: float) -> dict:
        with admission.slot(ticket, deadline):  # gives the ticket back on the way out
            signature_name, inputs, row = codec.parse_predict_body(
                body, servable.signature, max_depth=limits.max_json_depth,
                allow_non_finite=limits.allow_non_finite_inputs)
            outputs = store.predict(servable, signature_name, inputs)
        if time.monotonic() > deadline:
            raise admission.expire(limits.request_timeout_s, "running the prediction")
        response = codec.predict_response(outputs, row)
        warnings = codec.non_finite_outputs(outputs)
        if warnings:
            log.warning("%s version %d: %s", servable.name, servable.version, " ".join(warnings))
            response["warnings"] = warnings
        return response

    async def call(request: Request, name, version, label, run, what: str) -> Response:
        """One admitted request: read the body, resolve the servable, `run(servable, body, ticket, deadline)`
        in a worker thread, all within the request deadline."""
        ticket = admission.enter()
        deadline = time.monotonic() + limits.request_timeout_s
        try:
            with anyio.fail_after(limits.request_timeout_s):
                body = await _read_body(request, limits.max_request_bytes)
                servable = store.resolve(name, version, label)
                # abandon_on_cancel: at the deadline the client gets its 504 at once; the thread finishes its
                # run (TensorFlow cannot stop one) and only then frees its slot.
                return _json(await anyio.to_thread.run_sync(run, servable, body, ticket, deadline,
                                                            abandon_on_cancel=True, limiter=threads))
        except TimeoutError:
            raise admission.expire(limits.request_timeout_s, f"reading the request or running the {what}") from None
        finally:
            if not ticket.started:
                ticket.close()

    async def predict_call(request: Request, name, version, label) -> Response:
        return await call(request, name, version, label, predict, "prediction")

    def run_classify(servable, body: bytes, ticket, deadline: float) -> dict:
        with admission.slot(ticket, deadline):
            codec.check_json_depth(body, limits.max_json_depth)
            try:
                parsed = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise invalid(f"JSON Parse error: {e}") from None
            response = classify.classify(store, servable, classify.request_from_json(parsed, servable.name, servable))
        if time.monotonic() > deadline:
            raise admission.expire(limits.request_timeout_s, "running the classification")
        return classify.result_json(response)

    async def classify_call(request: Request, name, version, label) -> Response:
        return await call(request, name, version, label, run_classify, "classification")

    async def models(request: Request) -> Response:
        m = _PATH.match(request.path_params["path"])
        try:
            if m is None:
                raise invalid(f"Malformed request: {request.method} {request.url.path}")
            name, label, verb = m["name"], m["label"], m["verb"]
            version = int(m["version"]) if m["version"] else None
            if request.method == "GET" and verb is None:
                return _json(codec.proto_json(store.status(name, version, label)))
            if request.method == "GET" and verb == "/metadata":
                servable = store.resolve(name, version, label)
                return _json(metadata_json(metadata_response(servable)))
            if request.method == "POST" and verb == ":predict":
                return await predict_call(request, name, version, label)
            if request.method == "POST" and verb == ":classify":
                return await classify_call(request, name, version, label)
            if request.method == "POST" and verb == ":regress":
                _classify_or_regress(store.resolve(name, version, label), verb[1:])
            raise invalid(f"Malformed request: {request.method} {request.url.path}")
        except ServingError as e:
            return _error(e)
        except Exception as e:  # noqa: BLE001 - a runtime failure or a bug: a status code, and the server goes on
            error = runtime_error(e)
            if error.code == "INTERNAL":
                log.exception("Request %s %s failed", request.method, request.url.path)
            return _error(error)

    async def openapi(request: Request) -> Response:
        return _json(spec)

    async def malformed(request: Request, exc) -> Response:  # paths and methods outside the API
        status = getattr(exc, "status_code", 404)
        return _json(codec.error_body(f"Malformed request: {request.method} {request.url.path}"), status)

    app = Starlette(routes=[Route("/v1/models/{path:path}", models, methods=["GET", "POST"]),
                            Route(OPENAPI_PATH, openapi, methods=["GET"])],
                    exception_handlers={404: malformed, 405: malformed})
    app.router.redirect_slashes = False  # a trailing slash is a malformed path (404 JSON), as in TF Serving
    return app


def _classify_or_regress(servable, verb: str):
    """TF Serving's answer for a model without such a signature (`tensorflow_serving/servables/tensorflow/
    classifier.cc`: "Expected classification signature method_name to be ..."), else UNIMPLEMENTED: this
    server runs predict and classify (regress is left out)."""
    method = f"tensorflow/serving/{verb}"
    found = {key: sig.method_name for key, sig in servable.signature_defs.items()}
    if method not in found.values():
        noun = {"classify": "classification", "regress": "regression"}[verb]
        raise invalid(f"Expected {noun} signature method_name to be {method}; {servable.name} has only "
                      f"{sorted(set(found.values()))}. Use :predict.")
    raise ServingError("UNIMPLEMENTED", f"{verb} is not supported by this server; use predict.")


OPENAPI_PATH = "/v1/openapi.json"
