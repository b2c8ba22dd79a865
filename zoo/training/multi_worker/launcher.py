"""The local launcher: `zoo train --workers N` as N processes on 127.0.0.1 with free ports.

When one worker dies, the others get `GRACE_S` to stop on their own (naming it) before they are stopped;
the launcher names the dead worker.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from zoo.errors import ZooError
from zoo.training.multi_worker.cluster import JAX_ENV

GRACE_S = 45.0  # the launcher: how long the others get to stop on their own after one died


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _check_workers(workers) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer. Received: workers={workers!r}")


def local_tf_configs(workers: int) -> list[str]:
    """One TF_CONFIG per worker of a loopback cluster on free ports; worker 0 is the chief."""
    _check_workers(workers)
    addresses = [f"127.0.0.1:{p}" for p in free_ports(workers)]
    return [json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": i}}) for i in range(workers)]


def local_environments(workers: int, backend: str = "tensorflow") -> list[dict]:
    """The environment of each local worker: its TF_CONFIG (TensorFlow) or `JAX_ENV` (JAX, process 0 the
    coordinator on a free port)."""
    _check_workers(workers)
    if backend == "tensorflow":
        return [{"TF_CONFIG": c} for c in local_tf_configs(workers)]
    if backend != "jax":
        raise ZooError(f"--workers needs the tensorflow or jax backend: Keras has no multi-process training on "
                       f"{backend}. Received: backend={backend!r}")
    coordinator = f"127.0.0.1:{free_ports(1)[0]}"
    return [dict(zip(JAX_ENV, (coordinator, str(workers), str(i)))) for i in range(workers)]


def _ended(code: int) -> str:
    import signal

    return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"


def launch(train_args: list[str], workers: int, timeout_s: float | None = None, backend: str = "tensorflow") -> int:
    """Runs `zoo train *train_args --strategy multi_worker` as `workers` local processes.

    Worker 0 (the chief) prints to this terminal; the others' output is shown
    only if they fail. Returns 0 when every worker exits 0. When one fails, the
    others get `GRACE_S` to notice and stop on their own (naming it), then are
    stopped; its exit code is returned (128 + the signal for a killed worker).
    """
    procs, logs = [], []
    for i, extra in enumerate(local_environments(workers, backend)):
        env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG" and k not in JAX_ENV}
        env.update(extra, KERAS_BACKEND=backend)
        cmd = [sys.executable, "-m", "zoo.cli", "train", *train_args, "--strategy", "multi_worker"]
        log = None if i == 0 else tempfile.TemporaryFile("w+")  # a file, not a pipe: never blocks the worker
        logs.append(log)
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=log, text=True))
    print(f"launched {workers} {backend} workers: " + ", ".join(f"worker {i} pid {p.pid}" for i, p in enumerate(procs)),
          file=sys.stderr, flush=True)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    codes: list[int | None] = [None] * workers
    failed = failed_at = None
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            if codes[i] is None and p.poll() is not None:
                codes[i] = p.returncode
                if p.returncode != 0 and failed is None:
                    failed, failed_at = i, time.monotonic()
                    print(f"error: worker {i} (pid {p.pid}) {_ended(p.returncode)}; waiting up to {GRACE_S:g} s for "
                          "the others to stop", file=sys.stderr, flush=True)
        if failed is not None and time.monotonic() - failed_at > GRACE_S:
            break
        if deadline is not None and time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for i, p in enumerate(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            codes[i] = p.returncode
    for i, log in enumerate(logs):
        if log is not None:
            if codes[i] != 0:
                log.seek(0)
                sys.stderr.write(f"--- worker {i} (exit {codes[i]}) ---\n{log.read()[-4000:]}\n")
            log.close()
    if failed is not None:
        print(f"error: worker {failed} {_ended(codes[failed])}; every worker has stopped "
              f"({', '.join(f'worker {i}: {_ended(c) if c else 0}' for i, c in enumerate(codes))}). The chief's "
              "last backup is kept: re-running the same command resumes from it.", file=sys.stderr, flush=True)
        return 128 - codes[failed] if codes[failed] < 0 else codes[failed]
    if deadline is not None and any(c != 0 for c in codes):
        print(f"error: workers did not finish within {timeout_s:g} s", file=sys.stderr)
        return 1
    return 0
