"""TF Serving's REST API (https://www.tensorflow.org/tfx/serving/api_rest) as a Starlette app.

    GET  /v1/models/NAME[/versions/N | /labels/L]            model status
    GET  /v1/models/NAME[/versions/N | /labels/L]/metadata   signature defs
    POST /v1/models/NAME[/versions/N | /labels/L]:predict    prediction

Status and metadata bodies are the JSON forms of TF Serving's protos
(`GetModelStatusResponse`, `GetModelMetadataResponse`), as TF Serving's
`http_rest_api_handler.cc` writes them; errors are `{"error": "..."}` with the
HTTP status of the canonical code (`errors.HTTP_STATUS`).
"""

from __future__ import annotations

import logging
import re

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from zoo.deploy.serving import codec
from zoo.deploy.serving.errors import ServingError, invalid
from zoo.deploy.serving.metadata import metadata_json, metadata_response
from zoo.deploy.serving.store import ModelStore

log = logging.getLogger("zoo.serving")

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024

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


def create_app(store: ModelStore, *, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> Starlette:
    """The REST app over `store`; predictions run in a worker thread, off the event loop."""

    def predict(servable, body: bytes) -> dict:
        signature_name, inputs, row = codec.parse_predict_body(body, servable.signature)
        return codec.predict_response(store.predict(servable, signature_name, inputs), row)

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
                body = await _read_body(request, max_request_bytes)
                servable = store.resolve(name, version, label)
                return _json(await run_in_threadpool(predict, servable, body))
            if request.method == "POST" and verb in (":classify", ":regress"):
                raise ServingError("UNIMPLEMENTED", f"{verb[1:]} is not supported by this server; use predict.")
            raise invalid(f"Malformed request: {request.method} {request.url.path}")
        except ServingError as e:
            return _error(e)
        except Exception as e:  # a bug or a runtime failure: TF Serving's INTERNAL, and the server goes on
            log.exception("Request %s %s failed", request.method, request.url.path)
            return _error(ServingError("INTERNAL", f"{type(e).__name__}: {e}"))

    async def malformed(request: Request, exc) -> Response:  # paths and methods outside the API
        status = getattr(exc, "status_code", 404)
        return _json(codec.error_body(f"Malformed request: {request.method} {request.url.path}"), status)

    return Starlette(routes=[Route("/v1/models/{path:path}", models, methods=["GET", "POST"])],
                     exception_handlers={404: malformed, 405: malformed})
