"""TF Serving's REST API (https://www.tensorflow.org/tfx/serving/api_rest) as a Starlette app.

    GET  /v1/models/NAME[/versions/N | /labels/L]            model status
    GET  /v1/models/NAME[/versions/N | /labels/L]/metadata   signature defs
    POST /v1/models/NAME[/versions/N | /labels/L]:predict    prediction
    POST /v1/models/NAME[/versions/N | /labels/L]:classify   classification (classify.py)
    POST /v1/models/NAME[/versions/N | /labels/L]:regress    regression (classify.py)
    OPTIONS (any path)                                       CORS preflight

    GET  /v1/openapi.json                                    this API as OpenAPI 3 (openapi.py)

Paths are matched as TF Serving matches them (`tensorflow_serving/model_servers/http_rest_api_util.cc`:
`ParseModelInfo`; case-insensitive, any other path under /v1/ is "Malformed request", 400). Status and
metadata bodies are the JSON forms of TF Serving's protos (`GetModelStatusResponse`,
`GetModelMetadataResponse`), as TF Serving's `http_rest_api_handler.cc` writes them; errors are
`{"error": "..."}` with the HTTP status of the canonical code (`errors.HTTP_STATUS`), every one of
them: a body over the size limit is 413, a full queue 429, a passed deadline 504 (`limits.py`).
A predict response whose outputs hold NaN or Infinity carries a `"warnings"` list next to the
predictions (TF Serving sends them silently). With `cors`, every response carries TF Serving's
CORS headers (`--rest_api_enable_cors_support`, `http_server.cc`).
"""

from __future__ import annotations

import logging
import re
import time
import urllib.parse

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tensorflow_serving.apis import classification_pb2, regression_pb2

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


def _raw(text: bytes, status: int = 200) -> Response:
    """JSON text written by the codec (its number formatting is TF Serving's, json_tensor.cc: WriteDecimal)."""
    return Response(text, status_code=status, media_type="application/json")


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


def create_app(store: ModelStore, limits: Limits | None = None, admission: Admission | None = None,
               cors: bool = False) -> Starlette:
    """The REST app over `store`; predictions run in worker threads, off the event loop, within `admission`.
    `cors`: TF Serving's `--rest_api_enable_cors_support` (`CORSHeaders`)."""
    limits = limits or Limits()
    admission = admission or Admission(limits.max_concurrent_requests, limits.max_queued_requests)
    # One thread per admitted request, so a request admitted to the queue never waits for a thread instead.
    threads = anyio.CapacityLimiter(admission.capacity)
    spec = openapi_spec()

    def predict(servable, body: bytes, ticket, deadline: float) -> bytes:
        with admission.slot(ticket, deadline):  # gives the ticket back on the way out
            signature_name, inputs, row = codec.parse_predict_body(
                body, servable.signature, max_depth=limits.max_json_depth,
                allow_non_finite=limits.allow_non_finite_inputs)
            outputs = store.predict(servable, signature_name, inputs)
        if time.monotonic() > deadline:
            raise admission.expire(limits.request_timeout_s, "running the prediction")
        warnings = codec.non_finite_outputs(outputs)
        if warnings:
            log.warning("%s version %d: %s", servable.name, servable.version, " ".join(warnings))
        return codec.predict_response(outputs, row, {"warnings": warnings} if warnings else None)

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
                return _raw(await anyio.to_thread.run_sync(run, servable, body, ticket, deadline,
                                                           abandon_on_cancel=True, limiter=threads))
        except TimeoutError:
            raise admission.expire(limits.request_timeout_s, f"reading the request or running the {what}") from None
        finally:
            if not ticket.started:
                ticket.close()

    def examples_call(api: str):
        """A classify or regress run (`classify.py`) for `call`."""
        def run(servable, body: bytes, ticket, deadline: float) -> bytes:
            with admission.slot(ticket, deadline):
                if api == "classify":
                    request = classify.request_from_json(body, classification_pb2.ClassificationRequest(),
                                                         limits.max_json_depth)
                    response = classify.classify(store, servable, request)
                else:
                    request = classify.request_from_json(body, regression_pb2.RegressionRequest(),
                                                         limits.max_json_depth)
                    response = classify.regress(store, servable, request)
            if time.monotonic() > deadline:
                raise admission.expire(limits.request_timeout_s, f"running the {api}")
            return classify.classification_json(response.result) if api == "classify" else \
                classify.regression_json(response.result)

        return run

    async def models(request: Request) -> Response:
        """TF Serving's handler for every path under /v1/ (`http_rest_api_handler.cc: ProcessRequest`)."""
        try:
            if request.method == "OPTIONS":
                return _preflight(request)
            api = _parse_path(request)
            if api is None:
                raise invalid(f"Malformed request: {request.method} {_raw_path(request)}")
            verb, name, version, label = api
            if request.method == "GET" and verb == "metadata":
                return _json(metadata_json(metadata_response(store.resolve(name, version, label))))
            if request.method == "GET":
                return _json(codec.proto_json(store.status(name, version, label)))
            if verb == "predict":
                return await call(request, name, version, label, predict, "prediction")
            if verb in ("classify", "regress"):
                return await call(request, name, version, label, examples_call(verb), verb)
            raise invalid(f"Malformed request: {request.method} {_raw_path(request)}")
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
                            Route(OPENAPI_PATH, openapi, methods=["GET"]),
                            *_api_routes(models)],
                    exception_handlers={404: malformed, 405: malformed})
    app.router.redirect_slashes = False  # a trailing slash is a malformed path (404 JSON), as in TF Serving
    if cors:
        app.add_middleware(CORSHeaders)
    return app


# ---- paths, preflight and CORS (TF Serving's http_server.cc, http_rest_api_util.cc) -------------------------

# http_rest_api_util.cc: kPredictionApiGegex, kModelStatusApiRegex (under kHTTPRestApiHandlerPathRegex, "(?i)/v1/.*").
_POST_PATH = re.compile(r"(?i)/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)")
_GET_PATH = re.compile(r"(?i)/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:\/(metadata))?")
_API_PREFIX = re.compile(r"(?i)/v1/")


def _raw_path(request: Request) -> str:
    return request.scope.get("raw_path", request.url.path.encode()).decode("latin-1").split("?")[0]


def _parse_path(request: Request):
    """http_rest_api_util.cc's `ParseModelInfo`: (verb, name, version, label), or None for a path of no API.
    The verb is compared as written ("PREDICT" matches the path, then no API: "Malformed request")."""
    path = _raw_path(request)
    m = (_POST_PATH if request.method == "POST" else _GET_PATH if request.method in ("GET", "HEAD") else None)
    m = m and m.fullmatch(path)
    if not m:
        return None
    name, version, label, verb = (urllib.parse.unquote(g) if g else g for g in m.groups())
    if version is not None:
        if int(version) > 2**63 - 1:
            raise invalid(f"Failed to convert version: {version} to numeric.")
        version = int(version)
    if request.method == "POST":
        if verb not in ("classify", "regress", "predict"):
            return None
    elif not name:
        raise invalid("Missing model name in request.")
    else:
        verb = "metadata" if verb == "metadata" else None
    return verb, name, version, label


_ORIGIN = re.compile(r"https?://")


def _preflight(request: Request) -> Response:
    """http_server.cc's answer to OPTIONS: 200 without a body for a CORS preflight (an Origin header naming
    http:// or https://), else 400 (FAILED_PRECONDITION, "Origin header is missing in CORS preflight"); TF
    Serving sends that 400 without a body, this server with the error as every other error."""
    if _ORIGIN.search(request.headers.get("origin", "")):
        return Response(b"", status_code=200)
    return _error(ServingError("FAILED_PRECONDITION", "Origin header is missing in CORS preflight"))


def _api_routes(endpoint) -> list:
    """Every method on every path under /v1/ goes to TF Serving's handler (methods other than GET, POST and
    OPTIONS: "Malformed request", 400)."""
    return [Route("/{path:path}", _under_v1(endpoint),
                  methods=["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"])]


def _under_v1(endpoint):
    async def handle(request: Request) -> Response:
        if not _API_PREFIX.match(_raw_path(request)):
            return _json(codec.error_body(f"Malformed request: {request.method} {request.url.path}"), 404)
        return await endpoint(request)

    return handle


# http_rest_api_util.cc: AddCORSHeaders.
CORS_HEADERS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "POST, GET",
                "Access-Control-Allow-Headers": "Content-Type"}


class CORSHeaders:
    """`--rest_api_enable_cors_support`: TF Serving's CORS headers on every response of the API, errors too."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.decode("latin-1").lower() not in {h.lower() for h in CORS_HEADERS}]
                message = {**message, "headers": headers + [(k.encode(), v.encode()) for k, v in CORS_HEADERS.items()]}
            await send(message)

        await self.app(scope, receive, with_headers)


OPENAPI_PATH = "/v1/openapi.json"
