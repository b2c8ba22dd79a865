"""Version swap under load: a new version is published while 32 clients send requests.

TF Serving's promise (its "availability-preserving" version policy, `tensorflow_serving/
core/aspired_versions_manager.h`): the new version is loaded and warmed up before it
takes requests, the old one keeps serving until then and is unloaded only after, so
no request fails and every answer comes from one whole version.

`lenet5` version 1 is published to a temporary base directory with warmup records and
served by `zoo serve` in a subprocess (polling every 0.2 s). Clients are threads here,
half over REST and half over gRPC, each with its own connection, in a closed loop with
one MNIST-shaped input. After a few seconds version 2 (other weights) is published;
once answers from it arrive, version 1 is removed (`prune`) while requests still run.
Every answer is matched against Keras's own predictions for version 1 and 2 (computed
in this process, independently of the server): a request fails, or an answer matches
neither, and the run is a failure.
"""

from __future__ import annotations

import tempfile
import threading
import time

import numpy as np

from benchmarks.common import machine, markdown_table

MODEL = "lenet5"
POLL_S = 0.2


def add_arguments(parser) -> None:
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients, half REST, half gRPC (32)")
    parser.add_argument("--before-s", type=float, default=3.0, help="seconds of load before publishing (3)")
    parser.add_argument("--after-s", type=float, default=3.0,
                        help="seconds of load after the new version answers, and again after the old is removed (3)")


def run(args) -> dict:
    return measure(args.clients, args.before_s, args.after_s)


class Observations:
    """What the clients saw: per request its protocol, the version its answer matches (0: none) and any error."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answers = []  # (time, protocol, version)
        self.failures = []  # (time, protocol, repr of the error)

    def seen(self, protocol: str) -> dict[int, int]:
        with self.lock:
            counts = {}
            for _, p, v in self.answers:
                if p == protocol:
                    counts[v] = counts.get(v, 0) + 1
            return counts

    def first(self, version: int) -> float | None:
        with self.lock:
            return next((t for t, _, v in self.answers if v == version), None)


def load(rest_url: str, grpc_target: str, model: str, input_name: str, x: np.ndarray, classify, clients: int,
         stop: threading.Event, observations: Observations) -> list[threading.Thread]:
    """Starts `clients` closed-loop client threads (half REST, half gRPC) until `stop` is set.

    `classify(outputs: np.ndarray) -> version` says which version computed an answer (0: none);
    a gRPC answer must also name that version in its model_spec.
    """
    import grpc
    import httpx
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    body = {"instances": x.tolist()}
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs[input_name].CopyFrom(tf.make_tensor_proto(x))

    def rest():
        with httpx.Client(base_url=rest_url, timeout=60) as http:
            while not stop.is_set():
                try:
                    r = http.post(f"/v1/models/{model}:predict", json=body)
                    if r.status_code != 200:
                        raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
                    version = classify(np.asarray(r.json()["predictions"], np.float32))
                    with observations.lock:
                        observations.answers.append((time.monotonic(), "rest", version))
                except Exception as e:  # noqa: BLE001 - every failure is the finding
                    with observations.lock:
                        observations.failures.append((time.monotonic(), "rest", repr(e)[:300]))

    def grpc_client():
        with grpc.insecure_channel(grpc_target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            while not stop.is_set():
                try:
                    response = stub.Predict(request, timeout=60)
                    version = classify(tf.make_ndarray(next(iter(response.outputs.values()))))
                    if version and version != response.model_spec.version.value:
                        version = 0  # the answer of one version, labelled as another
                    with observations.lock:
                        observations.answers.append((time.monotonic(), "grpc", version))
                except Exception as e:  # noqa: BLE001 - every failure is the finding
                    with observations.lock:
                        observations.failures.append((time.monotonic(), "grpc", repr(e)[:300]))

    threads = [threading.Thread(target=rest if i % 2 == 0 else grpc_client, name=f"client-{i}", daemon=True)
               for i in range(clients)]
    for t in threads:
        t.start()
    return threads


def classifier(expected: dict[int, np.ndarray], atol: float):
    """A function naming the version whose expected output an answer matches (0: none)."""
    def classify(out):
        for version, ref in expected.items():
            if out.shape == ref.shape and np.allclose(out, ref, atol=atol, rtol=0):
                return version
        return 0

    return classify


def _wait(condition, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def swap(rest_url, grpc_target, model, input_name, x, classify, publish_new, remove_old, *, clients=32,
         before_s=3.0, after_s=3.0, timeout_s=120.0) -> dict:
    """Runs the load, publishes the new version (`publish_new()`) and, once it answers, removes the old
    (`remove_old()`); returns the observations as numbers."""
    observations, stop = Observations(), threading.Event()
    threads = load(rest_url, grpc_target, model, input_name, x, classify, clients, stop, observations)
    start = time.monotonic()
    try:
        time.sleep(before_s)
        published = time.monotonic()
        publish_new()
        new_seen = _wait(lambda: observations.first(2) is not None, timeout_s)
        time.sleep(after_s)
        removed = time.monotonic()
        remove_old()
        time.sleep(after_s)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    first_new = observations.first(2)
    last_old = max((t for t, _, v in observations.answers if v == 1), default=None)
    answers = len(observations.answers)
    return {
        "clients": clients,
        "requests": answers + len(observations.failures),
        "failed": len(observations.failures),
        "first_failures": [f"{p}: {e}" for _, p, e in observations.failures[:5]],
        "answers_by_version": {p: {str(v): n for v, n in sorted(observations.seen(p).items())}
                               for p in ("rest", "grpc")},
        "answers_from_neither_version": sum(1 for _, _, v in observations.answers if v == 0),
        "new_version_answered": new_seen,
        "new_version_first_answer_s": None if first_new is None else round(first_new - published, 3),
        "old_version_last_answer_after_removal_s": None if last_old is None else round(last_old - removed, 3),
        "wall_s": round(time.monotonic() - start, 2),
    }


def measure(clients: int = 32, before_s: float = 3.0, after_s: float = 3.0) -> dict:
    import keras

    import zoo
    from benchmarks.serving_load import ServerProcess, _images
    from zoo.deploy.formats.saved_model import publish_saved_model
    from zoo.deploy.serve import prune

    x = _images(1)
    models = {}
    for version in (1, 2):
        keras.utils.set_random_seed(version)
        models[version] = zoo.build(MODEL)
    expected = {v: m.predict(x, verbose=0) for v, m in models.items()}
    gap = float(np.abs(expected[1] - expected[2]).max())
    with tempfile.TemporaryDirectory(prefix="zoo-serving-swap-") as base:
        publish_saved_model(models[1], base, MODEL, warmup_data=_images(10))
        with ServerProcess(base, model=MODEL, poll_s=POLL_S) as server:
            result = swap(server.rest_url, server.grpc_target, MODEL, "image", x, classifier(expected, 1e-5),
                          lambda: publish_saved_model(models[2], base, MODEL, warmup_data=_images(10)),
                          lambda: prune(f"{base}/{MODEL}", keep=1), clients=clients, before_s=before_s,
                          after_s=after_s)
    return {
        "machine": machine(),
        "model": MODEL,
        "setup": (f"zoo serve in a subprocess on 127.0.0.1, polling every {POLL_S} s; {clients} client threads "
                  "(half REST row-format JSON, half gRPC), one connection each, closed loop, one 28x28x1 input per "
                  f"request; version 2 published after {before_s:g} s, version 1 removed {after_s:g} s after "
                  "version 2 first answered"),
        "versions_differ_by": gap,
        **result,
    }


def _last_old(t) -> str:
    if t is None:
        return "version 1 never answered."
    if t < 0:
        return f"version 1 answered last {-t:.2f} s before it was removed (new requests had moved to version 2)."
    return f"version 1 answered last {t:.2f} s after its removal (requests that had resolved it finish on it)."


def markdown(result: dict) -> str:
    m = result["machine"]
    rows = [{"protocol": p, **{f"version {v}": n for v, n in counts.items()}}
            for p, counts in result["answers_by_version"].items()]
    versions = sorted({k for r in rows for k in r if k.startswith("version")})
    return (
        "# Serving: version swap under load\n\n"
        f"{result['model']}; {result['setup']}. Machine: {m['cpus']} CPUs ({m['cpu_model']}), TensorFlow "
        f"{m['tensorflow']}.\n\n"
        f"**{result['requests']} requests, {result['failed']} failed, "
        f"{result['answers_from_neither_version']} answers matching neither version.** Version 2 answered first "
        f"{result['new_version_first_answer_s']} s after `publish` was called (export, poll, load, warmup); "
        + _last_old(result['old_version_last_answer_after_removal_s']) + "\n\n"
        + markdown_table(rows, [("protocol", "protocol")] + [(v, f"answers from {v}") for v in versions])
    )
