"""Load and faults, loopback only, bounded in time: concurrent clients across a version publish, a
version removal and a config reload (0 failures, each answer from a version current while the request
was in flight); a version that fails to load or fails its warmup leaves the previous one serving
(TF Serving's AvailabilityPreservingPolicy, `core/availability_preserving_policy.cc`); SIGTERM drains
the requests in flight (`Server.stop`: uvicorn's graceful shutdown, grpc `server.stop(grace)`)."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from zoo.deploy.serve import Server

from .versioned import bad_warmup, config_text, publish, write_atomic


def _predict(client, url, model="m"):
    r = client.post(f"{url}/v1/models/{model}:predict", json={"instances": [[1.0]]}, timeout=30)
    assert r.status_code == 200, r.text
    return int(r.json()["predictions"][0][0])


def _wait(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("clients", [16, pytest.param(64, marks=pytest.mark.slow)])
def test_clients_across_publish_removal_and_reload_never_fail(tmp_path, clients):
    publish(tmp_path / "m", 1)
    publish(tmp_path / "other", 3)
    config = tmp_path / "models.config"
    write_atomic(config, config_text(("m", tmp_path / "m", "", {})))
    timeline, stop, failures, answers = [], threading.Event(), [], []
    with Server(None, rest_port=0, grpc_port=0, poll_s=0.02, config_file=config, config_poll_s=0.02,
                max_concurrent_requests=64, max_queued_requests=256) as server:

        def current():
            served = server.store.served().get("m")
            return max(served) if served else None

        def monitor():  # the version a request arriving now gets: the highest loaded
            while not stop.is_set():
                timeline.append((time.monotonic(), current()))
                time.sleep(0.002)

        def client():
            with httpx.Client() as http:
                while not stop.is_set():
                    sent = time.monotonic()
                    try:
                        version = _predict(http, server.rest_url)
                    except Exception as e:  # noqa: BLE001 - any failure is the bug under test
                        failures.append(repr(e))
                        continue
                    answers.append((sent, time.monotonic(), version))

        threads = [threading.Thread(target=monitor)] + [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        time.sleep(0.15)
        publish(tmp_path / "m", 2)  # latest: 2 replaces 1
        _wait(lambda: server.store.served()["m"] == [2])
        time.sleep(0.15)
        os.rename(tmp_path / "m" / "2", tmp_path / "m" / ".removed")  # 2 disappears: 1 loads again, then 2 goes
        _wait(lambda: server.store.served()["m"] == [1])
        time.sleep(0.15)
        # ReloadConfigChangeModelBasePath: the same name now reads another folder, holding version 3.
        write_atomic(config, config_text(("m", tmp_path / "other", "", {})))
        _wait(lambda: server.store.served()["m"] == [3])
        time.sleep(0.15)
        stop.set()
        for t in threads:
            t.join()
    assert failures == []
    assert {v for _, _, v in answers} == {1, 2, 3}
    times = [t for t, _ in timeline]
    import bisect
    for sent, received, version in answers:
        lo = max(bisect.bisect_right(times, sent) - 1, 0)
        hi = bisect.bisect_right(times, received)
        assert version in {v for _, v in timeline[lo:hi + 1]}, (sent, received, version)


@pytest.mark.parametrize("fault", ["load", "warmup"])
def test_a_version_that_fails_to_load_or_warm_up_leaves_the_previous_one_serving(tmp_path, fault):
    publish(tmp_path / "m", 1)
    with Server(tmp_path, rest_port=0, grpc_port=0, poll_s=0) as server:
        if fault == "warmup":
            publish(tmp_path / "m", 2, warmup=bad_warmup())
        else:
            (tmp_path / "m" / "2").mkdir()
            (tmp_path / "m" / "2" / "saved_model.pb").write_bytes(b"\x08garbage")
        server.store.refresh()
        with httpx.Client() as http:
            assert _predict(http, server.rest_url) == 1
            status = http.get(f"{server.rest_url}/v1/models/m").json()["model_version_status"]
        assert [(s["version"], s["state"]) for s in status] == [("1", "AVAILABLE"), ("2", "END")]
        publish(tmp_path / "m", 3)  # a good version after the bad one replaces 1 as usual
        server.store.refresh()
        assert server.store.served() == {"m": [3]}


def _slow_batching(tmp_path, timeout_micros=3_000_000):
    params = tmp_path / "batching.config"
    params.write_text(f"max_batch_size {{ value: 64 }}\nbatch_timeout_micros {{ value: {timeout_micros} }}\n")
    return params


def _drain(url, n=6):
    results = [None] * n

    def call(i):
        with httpx.Client() as http:
            try:
                results[i] = _predict(http, url)
            except Exception as e:  # noqa: BLE001 - reported by the test
                results[i] = repr(e)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads, results


def test_stop_drains_the_requests_in_flight(tmp_path):
    """What SIGTERM runs (`Server.serve_forever`): requests waiting in a batch are answered before it returns."""
    publish(tmp_path / "m", 1)
    server = Server(tmp_path, rest_port=0, grpc_port=0, poll_s=0, batching=True,
                    batching_parameters=_slow_batching(tmp_path, 1_000_000)).start()
    threads, results = _drain(server.rest_url)
    queued = lambda: sum(b.rows for q in list(server.batcher._queues.values()) for b in q)  # noqa: E731
    _wait(lambda: queued() == len(results))  # every request arrived and waits in the batch queue
    server.stop()
    for t in threads:
        t.join()
    assert results == [1] * len(results)


@pytest.mark.slow
def test_sigterm_drains_the_requests_in_flight_before_the_process_exits(tmp_path):
    publish(tmp_path / "m", 1)
    config = tmp_path / "models.config"
    write_atomic(config, config_text(("m", tmp_path / "m", "", {})))
    process = subprocess.Popen(
        [sys.executable, "-m", "zoo", "serve", f"--model_config_file={config}", "--port=0", "--rest_api_port=0",
         "--enable_batching", f"--batching_parameters_file={_slow_batching(tmp_path)}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline()
        url = re.search(r"REST (http://\S+),", line).group(1)
        threads, results = _drain(url)
        time.sleep(1.5)  # every request has arrived: they wait out the 3 s batch timeout
        process.send_signal(signal.SIGTERM)
        for t in threads:
            t.join()
        assert process.wait(timeout=30) == 0
        assert results == [1] * len(results)
    finally:
        if process.poll() is None:
            process.kill()
