"""One error type for the server and the client, and TF Serving's status-code mapping.

TF Serving reports failures as a canonical status code (the gRPC codes) plus a
message. Over gRPC the code is the call's status; over REST it becomes an HTTP
status by `ToHTTPStatusCode` in `tensorflow_serving/model_servers/http_server.cc`
and the body is `{"error": "<message>"}` (TF Serving REST API doc, "Error").
"""

from __future__ import annotations

from zoo.errors import ZooError

# tensorflow_serving/model_servers/http_server.cc: ToHTTPStatusCode.
HTTP_STATUS = {
    "OK": 200,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}


class ServingError(ZooError):
    """A request TF Serving would fail: `code` is the canonical status name, e.g. "NOT_FOUND".

    `http_status` is the REST status the code maps to (or the one the server actually sent).
    """

    def __init__(self, code: str, message: str, http_status: int | None = None):
        if code not in HTTP_STATUS:
            raise ValueError(f"Unknown status code {code!r}. Expected one of: {', '.join(HTTP_STATUS)}.")
        self.code = code
        self.message = message
        self.http_status = http_status or HTTP_STATUS[code]
        super().__init__(f"{code}: {message}")

    @property
    def grpc_code(self):
        """The `grpc.StatusCode` (grpc imported here: `zoo serve --help` declares limits without it)."""
        import grpc

        return grpc.StatusCode[self.code]


class ModelDirError(ZooError, FileNotFoundError):
    """A base directory that does not exist or holds no published model."""


def invalid(message: str) -> ServingError:
    return ServingError("INVALID_ARGUMENT", message)


def not_found(message: str) -> ServingError:
    return ServingError("NOT_FOUND", message)


def graph_error_message(e: Exception) -> str:
    """The op's own message of a TensorFlow error ("Feature: x (data type: float) is required but could not
    be found."), as TF Serving's session reports it, without the Python-side "Graph execution error:",
    "Detected at node ... defined at" traceback and the node list."""
    lines = [line.strip() for line in str(e).strip().splitlines()]
    lines = [line for line in lines if line and not line.startswith(("Graph execution error", "Detected at node",
                                                                      "File ", "[[", "Traceback"))
             and "defined at (most recent call last)" not in line]
    kept = [line for line in lines if not line.startswith(("in ", "return ", "self.", "//"))]
    return (kept or lines or [str(e).strip() or type(e).__name__])[-1].split(" [[")[0].split(" [Op:")[0]


def runtime_error(e: Exception) -> ServingError:
    """The status of an unexpected failure while serving: memory and TensorFlow's own resource errors
    are RESOURCE_EXHAUSTED (the request was too big for the server now), anything else INTERNAL."""
    if isinstance(e, MemoryError) or type(e).__name__ == "ResourceExhaustedError":
        return ServingError("RESOURCE_EXHAUSTED", f"The server ran out of memory for this request ({type(e).__name__}); "
                                                  "send smaller batches.")
    return ServingError("INTERNAL", f"{type(e).__name__}: {e}")
