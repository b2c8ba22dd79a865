"""What the server accepts, declared once: request size, JSON nesting, non-finite values,
concurrency, queue and deadline. `Limits` drives the `Server` arguments, the `zoo serve`
flags (`add_arguments`, `from_args`) and the checks; `Admission` enforces the
concurrency, queue and deadline limits for REST and gRPC together.

A server that queues without bound answers every request eventually and none in time:
past `max_concurrent_requests` running and `max_queued_requests` waiting, a request is
shed at once with RESOURCE_EXHAUSTED (HTTP 429), which a client can retry with backoff
(gRPC's own `maximum_concurrent_rpcs` does the same; TF Serving's batching queue
answers "Batch queue is full" with UNAVAILABLE). A request that waits or runs past its
deadline gets DEADLINE_EXCEEDED (HTTP 504).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time

from zoo.deploy.serve.errors import ServingError


@dataclasses.dataclass(frozen=True)
class Limits:
    """Server limits; every field is also a `zoo serve` flag (`--max-request-mb` for the size)."""

    max_request_bytes: int = dataclasses.field(default=64 * 2**20, metadata={
        "help": "larger REST bodies get 413, larger gRPC messages or decoded tensors RESOURCE_EXHAUSTED"})
    max_json_depth: int = dataclasses.field(default=32, metadata={
        "help": "deeper nesting of JSON arrays and objects gets 400 (a tensor of rank 8 nests 9 deep)"})
    max_concurrent_requests: int = dataclasses.field(default=32, metadata={
        "help": "predictions running at once, REST and gRPC together"})
    max_queued_requests: int = dataclasses.field(default=128, metadata={
        "help": "predictions waiting for a slot; more are shed at once with 429 / RESOURCE_EXHAUSTED"})
    request_timeout_s: float = dataclasses.field(default=30.0, metadata={
        "help": "deadline per prediction, waiting included: 504 / DEADLINE_EXCEEDED (gRPC: the client's if sooner)"})
    allow_non_finite_inputs: bool = dataclasses.field(default=False, metadata={
        "help": "accept NaN and Infinity in float inputs (refused with 400 by default)"})

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "bool":
                ok, expected = isinstance(value, bool), "True or False"
            elif f.type == "int":
                low = 0 if f.name == "max_queued_requests" else 1
                ok, expected = isinstance(value, int) and not isinstance(value, bool) and value >= low, \
                    f"an integer >= {low}"
            else:
                ok, expected = isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(value) and value > 0, "a number > 0"
            if not ok:
                raise ValueError(f"{f.name} must be {expected}. Received: {f.name}={value!r}")


def add_arguments(parser) -> None:
    """`zoo serve` flags for every `Limits` field, with its default and help."""
    group = parser.add_argument_group("limits (zoo.deploy.serve.limits)")
    for f in dataclasses.fields(Limits):
        if f.name == "max_request_bytes":
            group.add_argument("--max-request-mb", type=float, default=f.default / 2**20,
                               help=f"{f.metadata['help']} (default {f.default / 2**20:g})")
        elif f.type == "bool":
            group.add_argument("--" + f.name.replace("_", "-"), action="store_true", help=f.metadata["help"])
        else:
            kind = int if f.type == "int" else float
            group.add_argument("--" + f.name.replace("_", "-"), type=kind, default=f.default,
                               help=f"{f.metadata['help']} (default {f.default})")


def from_args(args) -> Limits:
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(Limits) if f.name != "max_request_bytes"}
    return Limits(max_request_bytes=int(args.max_request_mb * 2**20), **values)


class Ticket:
    """One admitted request; `close()` (idempotent) gives its place back."""

    __slots__ = ("_admission", "_closed", "started")

    def __init__(self, admission: "Admission"):
        self._admission, self._closed, self.started = admission, False, False

    def close(self) -> None:
        with self._admission._lock:
            if not self._closed:
                self._closed = True
                self._admission._admitted -= 1


class Admission:
    """Counts the requests in the server; at most `running` run at once, at most `queued` wait.

    `enter()` admits or sheds a request without blocking; `slot(ticket, deadline)` waits for a
    free slot until the deadline (a `time.monotonic()` value) and holds it while the prediction runs.
    """

    def __init__(self, running: int, queued: int):
        self.running, self.queued = running, queued
        self._slots = threading.BoundedSemaphore(running)
        self._lock = threading.Lock()
        self._admitted = 0
        self.shed = 0  # requests refused because the queue was full
        self.expired = 0  # requests whose deadline passed while waiting or running

    @property
    def capacity(self) -> int:
        return self.running + self.queued

    def enter(self) -> Ticket:
        with self._lock:
            if self._admitted >= self.capacity:
                self.shed += 1
                raise ServingError("RESOURCE_EXHAUSTED", (
                    f"The server is at capacity: {self.running} predictions running and {self.queued} queued "
                    "(max_concurrent_requests, max_queued_requests). Retry after a short backoff."))
            self._admitted += 1
        return Ticket(self)

    def slot(self, ticket: Ticket, deadline: float):
        """A context manager holding a running slot; DEADLINE_EXCEEDED if none frees up in time."""
        return _Slot(self, ticket, deadline)

    def expire(self, waited_s: float, what: str) -> ServingError:
        with self._lock:
            self.expired += 1
        return ServingError("DEADLINE_EXCEEDED", f"Deadline exceeded after {waited_s:.2f} s {what}; the server is "
                                                 "busy or the request is too large for the deadline.")


class _Slot:
    def __init__(self, admission: Admission, ticket: Ticket, deadline: float):
        self.admission, self.ticket, self.deadline = admission, ticket, deadline

    def __enter__(self):
        self.ticket.started = True
        start = time.monotonic()
        if not self.admission._slots.acquire(timeout=max(0.0, self.deadline - start)):
            self.ticket.close()
            raise self.admission.expire(time.monotonic() - start, "waiting in the queue")
        return self

    def __exit__(self, *exc):
        self.admission._slots.release()
        self.ticket.close()
