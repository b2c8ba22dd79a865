"""Load on the local TF Serving-compatible server: N concurrent clients, REST and gRPC, batching off and on.

The MNIST CNN (`convnet_bn`, freshly built: the weights do not change the speed; parity
is tested in tests/test_serving.py) is published with warmup records to a temporary
base directory and served by `zoo serve` in a subprocess on loopback ports. The
server runs in its own process, as it would in use, so the clients (threads here)
do not compete with it for the GIL; on a small machine they still share its cores,
which the results record (`machine.cpus`).

Each of N = 1, 8, 32 clients sends a fixed number of single-image predict requests,
one after another (closed loop), through its own connection: plain HTTP POSTs of
TF Serving's row format, or the official `PredictionServiceStub`. Requests are
encoded once up front, so the clients spend their CPU on the transport only. Each
configuration stops at its time limit; the rows say whether it did (`truncated`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.common import child_env, machine, markdown_table, percentile

MODEL = "convnet_bn"


def add_load_arguments(parser, protocols: str = "rest,grpc") -> None:
    """The load's flags, shared with `benchmarks.serving_artifacts`: clients, requests, time cap, protocols."""
    parser.add_argument("--clients", default="1,8,32", help="concurrent clients, comma-separated (1,8,32)")
    parser.add_argument("--requests-per-client", type=int, default=100, help="requests each client sends (100)")
    parser.add_argument("--time-limit-s", type=float, default=20.0, help="cap per configuration (20 s)")
    parser.add_argument("--protocols", default=protocols, help="rest, grpc or both")


def add_arguments(parser) -> None:
    add_load_arguments(parser)
    parser.add_argument("--batching", default="off,on", help="server-side batching: off, on or both")


def run(args) -> dict:
    clients = [int(c) for c in str(args.clients).split(",")]
    protocols = [p for p in str(args.protocols).split(",") if p]
    batching = [b == "on" for b in str(args.batching).split(",") if b]
    for p in protocols:
        if p not in ("rest", "grpc"):
            raise ValueError(f"protocols must be rest and/or grpc. Received: {p!r}")
    return measure(clients, args.requests_per_client, args.time_limit_s, protocols, batching)


def measure(clients=(1, 8, 32), requests_per_client: int = 100, time_limit_s: float = 20.0,
            protocols=("rest", "grpc"), batching=(False, True), min_requests: int = 0) -> dict:
    """Rows of throughput and latency per protocol, client count and batching setting.

    Each client sends `requests_per_client` requests, or more where `n` clients would send fewer than
    `min_requests` in all: a point of one or two clients is otherwise over in tens of milliseconds,
    too short to time.
    """
    x = _images(max(clients))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="zoo-serving-load-") as base:
        _publish(base, x)
        rows = []
        with contextlib.ExitStack() as stack:
            # One idle server per setting, measured in turn for each row, so a drift in the machine's
            # other load does not fall on one setting only.
            servers = {b: stack.enter_context(ServerProcess(base, batching=b)) for b in batching}
            for protocol in protocols:
                for n in clients:
                    for batched, server in servers.items():
                        requests = max(requests_per_client, -(-min_requests // n))
                        row = _load(server, protocol, n, requests, time_limit_s, x)
                        rows.append({"protocol": protocol, "batching": "on" if batched else "off", "clients": n,
                                     "requests_per_client": requests, **row})
    return {
        "machine": machine(),
        "model": MODEL,
        "request": "one 28x28x1 MNIST test image per predict request (REST: row format JSON; gRPC: TensorProto)",
        "server": "zoo serve in a subprocess on 127.0.0.1 (uvicorn + Starlette, grpcio)",
        "requests_per_client": requests_per_client,
        "time_limit_s": time_limit_s,
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "rows": rows,
    }


def _images(n: int) -> np.ndarray:
    try:
        import zoo.data

        return next(iter(zoo.data.load("mnist", "test", batch_size=n)))[0].numpy()
    except Exception:  # noqa: BLE001 - MNIST not prepared: the speed does not depend on the pixels
        return np.random.default_rng(0).random((n, 28, 28, 1), dtype=np.float32)


def _publish(base: str, x: np.ndarray) -> None:
    import keras

    import zoo
    from zoo.deploy.formats.saved_model import publish_saved_model

    keras.utils.set_random_seed(0)
    publish_saved_model(zoo.build(MODEL), base, MODEL, warmup_data=x)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`zoo serve` in a subprocess, ready when its REST status of `model` answers AVAILABLE.

    `extra`: more `zoo serve` flags (e.g. limits); `poll_s`: how often it scans for new versions.
    """

    def __init__(self, base: str, batching: bool = False, model: str = MODEL, extra=(), poll_s: float = 30):
        self.rest_port, self.grpc_port = _free_port(), _free_port()
        self.model = model
        self.args = [sys.executable, "-m", "zoo.cli", "serve", base, "--rest-port", str(self.rest_port),
                     "--grpc-port", str(self.grpc_port), "--poll-s", str(poll_s),
                     *(["--batching"] if batching else []), *extra]

    def __enter__(self):
        import httpx

        self.proc = subprocess.Popen(self.args, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zoo serve exited with {self.proc.returncode}: {self.proc.stderr.read().decode()}")
            try:
                if httpx.get(f"{self.rest_url}/v1/models/{self.model}", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise TimeoutError("zoo serve did not become ready within 120 s.")

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _rest_sender(server, body: bytes, model: str = MODEL):
    import httpx

    http = httpx.Client(base_url=server.rest_url, timeout=30, headers={"content-type": "application/json"})

    def send():
        r = http.post(f"/v1/models/{model}:predict", content=body)
        if r.status_code != 200 or len(r.json()["predictions"]) != 1:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")

    return send, http.close


def _grpc_sender(server, request):
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def send():
        response = stub.Predict(request, timeout=30)
        if not response.outputs:
            raise RuntimeError("no outputs in the response")

    return send, channel.close


def _load(server, protocol: str, n: int, requests: int, time_limit_s: float, x: np.ndarray, model: str = MODEL,
          input_name: str = "image") -> dict:
    """n closed-loop clients, `requests` each; latency per request, throughput over the whole run."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    senders = []
    for i in range(n):
        image = x[i : i + 1]
        if protocol == "rest":
            senders.append(_rest_sender(server, json.dumps({"instances": image.tolist()}).encode(), model))
        else:
            request = predict_pb2.PredictRequest()
            request.model_spec.name = model
            request.inputs[input_name].CopyFrom(tf.make_tensor_proto(image))
            senders.append(_grpc_sender(server, request))
    for send, _ in senders:  # connect and warm each connection, untimed
        send()
    latencies, errors, lock = [], [], threading.Lock()
    start_line = threading.Barrier(n + 1)
    deadline = [0.0]

    def client(send):
        mine, failed = [], []
        start_line.wait()
        for _ in range(requests):
            if time.perf_counter() > deadline[0]:
                break
            t = time.perf_counter()
            try:
                send()
                mine.append((time.perf_counter() - t) * 1e3)
            except Exception as e:  # noqa: BLE001 - counted and reported
                failed.append(repr(e)[:200])
        with lock:
            latencies.extend(mine)
            errors.extend(failed)

    threads = [threading.Thread(target=client, args=(send,)) for send, _ in senders]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + time_limit_s
    t0 = time.perf_counter()
    start_line.wait()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for _, close in senders:
        close()
    done = len(latencies)
    return {
        "requests": done,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": round(wall, 3),
        "throughput_rps": round(done / wall, 1) if wall > 0 else None,
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "truncated": done + len(errors) < n * requests,
    }


def markdown(result: dict) -> str:
    m = result["machine"]
    columns = [("protocol", "protocol"), ("batching", "batching"), ("clients", "clients"),
               ("requests", "requests"), ("throughput_rps", "throughput (req/s)"), ("p50_ms", "p50 (ms)"),
               ("p99_ms", "p99 (ms)"), ("errors", "errors"), ("truncated", "hit time limit")]
    return (
        "# Serving load: `zoo serve`, REST and gRPC\n\n"
        f"{result['model']}, {result['request']}. {result['server']}. Clients are threads in the benchmark "
        f"process, {result['requests_per_client']} requests each, closed loop, one connection each, capped at "
        f"{result['time_limit_s']:g} s per row. Machine: {m['cpus']} CPUs ({m['cpu_model']}), TensorFlow "
        f"{m['tensorflow']}; clients and server share these cores.{_load_note(result)}\n\n"
        + markdown_table(result["rows"], columns)
    )


def _load_note(result: dict) -> str:
    load = result.get("load_average_1min")
    return (f" The machine's 1-minute load average was {load[0]:g} at the start and {load[1]:g} at the end "
            "(other processes shared it)." if load else "")


def plots(result: dict, folder, stem: str = "serving") -> list[Path]:
    """Throughput and p99 latency against the number of clients, per protocol and batching."""
    from benchmarks.common import pyplot, save_figure

    plt = pyplot()

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fig, (ax_tp, ax_p99) = plt.subplots(1, 2, figsize=(10, 4))
    series = sorted({(r["protocol"], r["batching"]) for r in result["rows"]})
    for protocol, batching in series:
        rows = sorted((r for r in result["rows"] if (r["protocol"], r["batching"]) == (protocol, batching)),
                      key=lambda r: r["clients"])
        n = [r["clients"] for r in rows]
        style = dict(marker="o", linestyle="-" if batching == "on" else "--", label=f"{protocol}, batching {batching}")
        ax_tp.plot(n, [r["throughput_rps"] for r in rows], **style)
        ax_p99.plot(n, [r["p99_ms"] for r in rows], **style)
    for ax, label in ((ax_tp, "throughput (requests/s)"), (ax_p99, "p99 latency (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    ax_tp.legend()
    fig.suptitle(f"zoo serve, {result['model']}, {result['machine']['cpus']} CPUs")
    path = folder / f"{stem}.png"
    save_figure(fig, path, dpi=120)
    return [path]

