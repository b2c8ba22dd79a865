"""The local development server: REST (uvicorn + Starlette) and gRPC (grpcio) over one `ModelStore`.

>>> with Server("saved_models", rest_port=0, grpc_port=0) as server:   # 0: free ports
...     Client(server.rest_url).predict(x, model="convnet_bn")

For development and tests; production runs TF Serving itself on the same directory
and `models.config` (`zoo serve --print-docker`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import ipaddress
import logging
import signal
import socket
import threading

import grpc
import uvicorn

from zoo.deploy.serve import model_config
from zoo.deploy.serve.batching import Batcher, BatchingParameters
from zoo.deploy.serve.grpc_service import add_services
from zoo.deploy.serve.limits import Admission, Limits
from zoo.deploy.serve.monitoring import Metrics, RestMetrics, grpc_interceptor
from zoo.deploy.serve.rest import create_app
from zoo.deploy.serve.store import ModelStore
from zoo.errors import UnknownNameError, ZooError

log = logging.getLogger("zoo.serving")


class ServerStartError(ZooError, OSError):
    """A port that cannot be bound, or a server that did not come up."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_REST_PORT = 8501
DEFAULT_GRPC_PORT = 8500


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Server:
    """Serves `base_dir` over REST and gRPC until `stop()`.

    Args:
        base_dir: TF Serving base directory; models are its subdirectories with integer versions.
        host: interface to bind (loopback by default; any other address logs a warning).
        rest_port, grpc_port: ports; 0 picks a free one (see `rest_port`/`grpc_port` after `start`).
        poll_s: seconds between scans for new or removed versions (`--file_system_poll_wait_seconds`).
        batching: run concurrent requests as one batch (`--enable_batching`); `batching_parameters`
            (a `BatchingParameters`, or the path of its text proto: `--batching_parameters_file`)
            configures it, `max_batch_size` is a shortcut for its field.
        config, config_file, config_poll_s, allow_unavailable_labels: the models and their version
            policies (`--model_config_file`, ...); see `ModelStore`.
        monitoring: a `MonitoringConfig` or the path of its text proto (`--monitoring_config_file`):
            the Prometheus endpoint (`zoo.deploy.serve.monitoring`), off without one.
        models, labels: see `ModelStore`.
        limits: request size, JSON depth, concurrency, queue, deadline, non-finite inputs
            (`zoo.deploy.serve.limits.Limits`); any of its fields may also be given as a keyword,
            e.g. `Server(base, max_request_bytes=2**20)`.
        trust: what the user accepts of what `zoo scan` reports (`zoo.deploy.formats.unsafe.Trust`); a version
            holding any other op is refused (`ModelStore`).
        cors: CORS headers on every REST response, as TF Serving's `--rest_api_enable_cors_support`.
    """

    def __init__(self, base_dir="saved_models", *, host: str = DEFAULT_HOST, rest_port: int = DEFAULT_REST_PORT,
                 grpc_port: int = DEFAULT_GRPC_PORT, poll_s: float = 1.0, batching: bool = False,
                 max_batch_size: int | None = None, batching_parameters=None, models=None, labels=None,
                 limits: Limits | None = None, trust=None, config=None, config_file=None,
                 config_poll_s: float = 0.0, allow_unavailable_labels: bool = False, monitoring=None,
                 cors: bool = False, **limit_overrides):
        fields = {f.name for f in dataclasses.fields(Limits)}
        for key in limit_overrides:
            if key not in fields:
                raise UnknownNameError("Server argument", key, sorted(fields))
        self.limits = dataclasses.replace(limits or Limits(), **limit_overrides)
        self.admission = Admission(self.limits.max_concurrent_requests, self.limits.max_queued_requests)
        self.batcher = None
        if batching:
            if isinstance(batching_parameters, (str, bytes)) or hasattr(batching_parameters, "__fspath__"):
                batching_parameters = BatchingParameters.read(batching_parameters)
            fields = {"max_batch_size": max_batch_size} if max_batch_size is not None else {}
            if fields and batching_parameters is None:
                fields["allowed_batch_sizes"] = ()
            self.batcher = Batcher(batching_parameters, **fields)
        if isinstance(monitoring, (str, bytes)) or hasattr(monitoring, "__fspath__"):
            monitoring = model_config.read_monitoring_config(monitoring)
        self.prometheus_path = model_config.prometheus_path(monitoring)
        self.metrics = Metrics()
        self.cors = cors
        self.store = ModelStore(base_dir, models, labels=labels, poll_s=poll_s, runner=self.batcher,
                                trust=trust, config=config, config_file=config_file, config_poll_s=config_poll_s,
                                allow_unavailable_labels=allow_unavailable_labels, metrics=self.metrics)
        self.host = host
        self.rest_port, self.grpc_port = rest_port, grpc_port
        self._grpc = self._uvicorn = self._thread = None

    @property
    def rest_url(self) -> str:
        return f"http://{self.host}:{self.rest_port}"

    @property
    def grpc_target(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    def start(self) -> "Server":
        """Loads the models, then listens; returns once both servers accept connections."""
        if not is_loopback(self.host):
            log.warning("Binding to %s: the server is reachable from other machines, without authentication or "
                        "TLS. Put it behind a proxy that provides them, or bind to 127.0.0.1.", self.host)
        self.store.start()
        try:
            self._start_grpc()
            self._start_rest()
        except BaseException:
            self.stop()
            raise
        log.info("Serving %s: REST %s, gRPC %s", self.store.base_dir, self.rest_url, self.grpc_target)
        return self

    def _start_grpc(self) -> None:
        # A thread for every request the admission lets in, plus a few for status and metadata calls;
        # beyond that grpcio itself answers RESOURCE_EXHAUSTED instead of queueing in its executor.
        workers = self.admission.capacity + 4
        self._grpc = grpc.server(concurrent.futures.ThreadPoolExecutor(workers, "zoo-grpc"),
                                 interceptors=[grpc_interceptor(self.metrics)],
                                 maximum_concurrent_rpcs=workers,
                                 options=[("grpc.max_receive_message_length", self.limits.max_request_bytes),
                                          ("grpc.max_send_message_length", -1), ("grpc.so_reuseport", 0)])
        add_services(self._grpc, self.store, self.limits, self.admission)
        try:
            port = self._grpc.add_insecure_port(f"{self.host}:{self.grpc_port}")
        except RuntimeError:
            port = 0
        if port == 0:
            raise ServerStartError(f"Cannot bind gRPC to {self.host}:{self.grpc_port} (in use?).")
        self.grpc_port = port
        self._grpc.start()

    def _start_rest(self) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP
        # (asyncio.base_events._set_nodelay); with proto 0 every response waited for a delayed ACK (40 ms).
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.rest_port))
        except OSError as e:
            sock.close()
            raise ServerStartError(f"Cannot bind REST to {self.host}:{self.rest_port}: {e.strerror}.") from None
        self.rest_port = sock.getsockname()[1]
        app = RestMetrics(create_app(self.store, self.limits, self.admission, cors=self.cors), self.metrics,
                          self.store, self.prometheus_path)
        config = uvicorn.Config(app, log_level="warning",
                                lifespan="off", access_log=False, timeout_graceful_shutdown=5)
        self._uvicorn = uvicorn.Server(config)
        self._uvicorn.install_signal_handlers = lambda: None  # signals belong to the caller (serve_forever)
        failed = []

        def run():
            try:
                asyncio.run(self._uvicorn.serve(sockets=[sock]))
            except BaseException as e:  # noqa: BLE001 - reported to start()
                failed.append(e)
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, name="zoo-rest", daemon=True)
        self._thread.start()
        while not self._uvicorn.started and self._thread.is_alive():
            self._thread.join(0.01)
        if not self._uvicorn.started:
            raise ServerStartError(f"The REST server did not start on {self.rest_url}: {failed[0] if failed else '?'}")

    def stop(self, grace_s: float = 5.0) -> None:
        """Stops accepting requests, lets those in flight finish (up to `grace_s`), unloads."""
        grpc_stopped = self._grpc.stop(grace_s) if self._grpc is not None else None  # both drain at once
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            self._thread.join(grace_s + 5)
        if grpc_stopped is not None:
            grpc_stopped.wait()
        if self.batcher is not None:
            self.batcher.close()
        self.store.stop()

    def serve_forever(self, ready=None) -> None:
        """Runs until SIGINT or SIGTERM, then shuts down gracefully; `ready(self)` is called once serving."""
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.start()
        if ready is not None:
            ready(self)
        try:
            while not stop.wait(1.0):
                pass
        finally:
            self.stop()

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
