"""TF Serving's Prometheus endpoint: the metrics TF Serving exports, under its names, in its format.

Served only when `--monitoring_config_file` enables it, at the path it gives (default
`/monitoring/prometheus/metrics`; `model_servers/http_server.cc`, `util/prometheus_exporter.cc`).

Metrics (TensorFlow monitoring names; the exporter turns every character outside
`[a-zA-Z0-9_]` into `:`, so `/tensorflow/serving/request_count` is scraped as
`:tensorflow:serving:request_count`):

- `/tensorflow/serving/request_count{model_name, status}`: every request, `status` the
  canonical code name (`servables/tensorflow/util.cc`: RecordModelRequestCount). REST requests
  count under `/v1/models/...` (model_name "" when the path names none), gRPC the Predict,
  Classify and Regress calls (`model_servers/prediction_service_impl.cc`).
- `/tensorflow/serving/request_latency{model_name, API, entrypoint}`: microseconds, successful
  requests only; API is the REST verb (`predict`, `classify`, `regress`, "" for GETs) or the gRPC
  method, entrypoint `REST` or `GRPC` (`http_server.cc`, `prediction_service_impl.cc`); buckets
  `Exponential(10, 1.8, 33)` as in `util.cc`.
- `/tensorflow/cc/saved_model/load_attempt_count{model_path, status}`: `success` or `fail` per
  version load (TensorFlow's `tensorflow/cc/saved_model/loader.cc`).
- `/zoo/serving/model_version_available{model_name, version}`: 1 per version serving now (zoo's;
  TF Serving exports no such gauge).

A REST status is mapped back to its canonical code by `errors.HTTP_STATUS` (400 reads as
INVALID_ARGUMENT, 500 as INTERNAL: REST alone cannot tell FAILED_PRECONDITION from
INVALID_ARGUMENT); gRPC statuses are exact.
"""

from __future__ import annotations

import collections
import re
import threading
import time

from tensorflow_serving.apis import get_model_status_pb2

from zoo.deploy.serve.errors import HTTP_STATUS

_LATENCY_LIMITS = [10 * 1.8 ** i for i in range(33)]  # Buckets::Exponential(10, 1.8, 33), then DBL_MAX
_CODE_OF_HTTP = {**{s: c for c, s in reversed(HTTP_STATUS.items())}, 400: "INVALID_ARGUMENT", 500: "INTERNAL",
                 409: "ABORTED", 200: "OK"}


def prometheus_name(name: str) -> str:
    """`prometheus_exporter.cc`: GetPrometheusMetricName."""
    name = re.sub(r"[^a-zA-Z0-9_]", ":", name)
    return "_" + name if name[:1].isdigit() else name


def _label_name(name: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9]", "_", name)
    return "_" + name if name[:1].isdigit() else name


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _number(x: float) -> str:
    """absl::StrCat of a double: six significant digits."""
    return f"{x:.6g}"


class Metrics:
    """Counters and latency histograms, thread-safe; `page(store)` is the Prometheus text."""

    REQUEST_COUNT = "/tensorflow/serving/request_count"
    REQUEST_LATENCY = "/tensorflow/serving/request_latency"
    LOAD_ATTEMPTS = "/tensorflow/cc/saved_model/load_attempt_count"
    AVAILABLE = "/zoo/serving/model_version_available"

    def __init__(self):
        self._lock = threading.Lock()
        self._requests: collections.Counter = collections.Counter()  # (model_name, status) -> n
        self._latency: dict[tuple, list] = {}  # (model_name, API, entrypoint) -> [buckets, sum]
        self._loads: collections.Counter = collections.Counter()  # (model_path, status) -> n

    def request(self, model_name: str, api: str, entrypoint: str, status: str, latency_us: float) -> None:
        with self._lock:
            self._requests[(model_name, status)] += 1
            if status != "OK":
                return  # http_server.cc, prediction_service_impl.cc: latency of successful requests only
            cell = self._latency.setdefault((model_name, api, entrypoint), [[0] * (len(_LATENCY_LIMITS) + 1), 0.0])
            index = next((i for i, limit in enumerate(_LATENCY_LIMITS) if latency_us < limit), len(_LATENCY_LIMITS))
            cell[0][index] += 1
            cell[1] += latency_us

    def load_attempt(self, model_path: str, ok: bool) -> None:
        with self._lock:
            self._loads[(model_path, "success" if ok else "fail")] += 1

    def request_count(self, model_name: str, status: str = "OK") -> int:
        with self._lock:
            return self._requests[(model_name, status)]

    def page(self, store=None) -> str:
        """The exporter's page (`PrometheusExporter::GeneratePage`): metrics sorted by name."""
        with self._lock:
            requests, loads = dict(self._requests), dict(self._loads)
            latency = {k: ([*v[0]], v[1]) for k, v in self._latency.items()}
        served = store.served() if store is not None else {}
        scalars = {
            self.REQUEST_COUNT: ("counter", ("model_name", "status"), requests),
            self.LOAD_ATTEMPTS: ("counter", ("model_path", "status"), loads),
            self.AVAILABLE: ("gauge", ("model_name", "version"),
                             {(m, str(v)): 1 for m, vs in served.items() for v in vs}),
        }
        lines = []
        for name in sorted([*scalars, self.REQUEST_LATENCY]):
            prom = prometheus_name(name)
            if name == self.REQUEST_LATENCY:
                lines.append(f"# TYPE {prom} histogram")
                for key, (buckets, total) in sorted(latency.items()):
                    labels = ",".join(f'{_label_name(n)}="{_label_value(v)}"'
                                      for n, v in zip(("model_name", "API", "entrypoint"), key))
                    cumulative = 0
                    for i, count in enumerate(buckets):
                        cumulative += count
                        le = _number(_LATENCY_LIMITS[i]) if i < len(_LATENCY_LIMITS) else "+Inf"
                        lines.append(f'{prom}_bucket{{{labels},le="{le}"}} {cumulative}')
                    lines.append(f"{prom}_sum{{{labels}}} {_number(total)}")
                    lines.append(f"{prom}_count{{{labels}}} {cumulative}")
                continue
            kind, label_names, points = scalars[name]
            lines.append(f"# TYPE {prom} {kind}")
            for key, value in sorted(points.items()):
                labels = ",".join(f'{_label_name(n)}="{_label_value(v)}"' for n, v in zip(label_names, key))
                lines.append(f"{prom}{{{labels}}} {value}")
        return "\n".join(lines) + "\n"


class RestMetrics:
    """ASGI middleware: counts and times the REST API's requests and answers the Prometheus path."""

    def __init__(self, app, metrics: Metrics, store, path: str | None):
        from zoo.deploy.serve.rest import _PATH  # the REST paths, one place (http_rest_api_handler.cc)

        self.app, self.metrics, self.store, self.path, self._pattern = app, metrics, store, path, _PATH

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.path is not None and scope["path"] == self.path and scope["method"] == "GET":
            body = self.metrics.page(self.store).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        if not scope["path"].startswith("/v1/models/"):
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = [500]

        async def capture(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            m = self._pattern.match(scope["path"][len("/v1/models/"):])
            name = m["name"] if m else ""
            verb = (m["verb"] or "") if m else ""
            api = verb[1:] if verb.startswith(":") else ""
            self.metrics.request(name, api, "REST", _CODE_OF_HTTP.get(status[0], "UNKNOWN"),
                                 (time.perf_counter() - start) * 1e6)


_GRPC_APIS = {f"/tensorflow.serving.PredictionService/{api}": api for api in ("Predict", "Classify", "Regress")}


def grpc_interceptor(metrics: Metrics):
    """A `grpc.ServerInterceptor` counting and timing Predict, Classify and Regress calls."""
    import grpc

    class Interceptor(grpc.ServerInterceptor):
        def intercept_service(self, continuation, details):
            handler = continuation(details)
            api = _GRPC_APIS.get(details.method)
            if handler is None or api is None or handler.unary_unary is None:
                return handler
            inner = handler.unary_unary

            def behavior(request, context):
                start = time.perf_counter()
                try:
                    response = inner(request, context)
                except BaseException:
                    code = context.code() if hasattr(context, "code") else None
                    metrics.request(_model_name(request), api, "GRPC", code.name if code else "UNKNOWN", 0)
                    raise
                metrics.request(_model_name(request), api, "GRPC", "OK", (time.perf_counter() - start) * 1e6)
                return response

            return grpc.unary_unary_rpc_method_handler(behavior, request_deserializer=handler.request_deserializer,
                                                       response_serializer=handler.response_serializer)

    return Interceptor()


def _model_name(request) -> str:
    """`model_spec.name` of a Predict, Classify or Regress request (field 1 in each), raw or parsed."""
    if isinstance(request, bytes):
        try:
            # GetModelStatusRequest has only field 1, a ModelSpec: the request's other fields stay unknown.
            return get_model_status_pb2.GetModelStatusRequest.FromString(request).model_spec.name
        except Exception:  # noqa: BLE001 - a malformed request: the handler reports it
            return ""
    return request.model_spec.name
