"""Runs conversions and verifications in a child process, so a crash fails one target only.

Converters and runtimes are native code: the TFLite converter segfaults on some
graphs (full int8 of a fixed-batch RNN), and a segfault cannot be caught in
Python. Each target therefore runs in a child process (a new interpreter, not a
fork: TensorFlow's thread pools do not survive fork). The child imports TensorFlow
once and serves targets one after another; if it dies, that target is reported
as failed with the signal, and a fresh child takes the next one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path


from zoo.child_process import tensorflow_env
from zoo.deploy.export.results import EXPORTED, FAILED_VERIFICATION, PASSED, ArtifactResult
from zoo.deploy.formats.jobs import CannotVerify, Job


def artifact_size(path, companions=()) -> int:
    """Bytes of the model's files (`companions`, such as a TF.js folder's web page, are not the model)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and p.name not in companions)


def execute(job: Job, progress=lambda partial: None) -> ArtifactResult:
    """Converts and verifies one target, in this process. Never raises for a format's own failure."""
    import importlib

    from zoo.deploy.export.verify import int8_remedy, verify
    from zoo.deploy.formats.conversion import Conversion

    target = job.target
    module = importlib.import_module(target.module)
    declared = getattr(module, "FORMAT", None)
    result = ArtifactResult(format=target.format, variant=target.variant, precision=target.precision,
                            options=dict(target.options))
    t0 = time.perf_counter()
    conversion = Conversion(job)
    try:
        converted = module.convert(conversion)
        if job.model.metadata:
            module.write_metadata(Path(converted.path), job.model.metadata)  # before verifying
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}"[:2000]
        result.attempts = list(getattr(e, "attempts", []))
        result.export_s = time.perf_counter() - t0
        return result
    result.status, result.path, result.route = EXPORTED, str(converted.path), converted.route
    result.attempts, result.notes, result.details = converted.attempts, converted.notes, converted.details
    result.export_s = time.perf_counter() - t0
    result.size_bytes = artifact_size(converted.path, getattr(declared, "companions", ()))
    progress(dataclasses.replace(result))
    if not job.verify:
        return result
    t1 = time.perf_counter()
    try:
        verification = verify(_open(module, converted.path, conversion), conversion)
    except CannotVerify as e:
        result.notes.append(f"not verified: {e}")
        result.verify_s = time.perf_counter() - t1
        return result
    except Exception as e:
        result.status = FAILED_VERIFICATION
        result.error = f"runtime error: {type(e).__name__}: {e}"[:2000]
        result.verify_s = time.perf_counter() - t1
        if os.environ.get("ZOO_DEBUG"):
            result.traceback = traceback.format_exc()
        return result
    result.verification, result.verify_s = verification, time.perf_counter() - t1
    result.status = PASSED if verification.passed else FAILED_VERIFICATION
    if verification.problems:
        remedy = int8_remedy(verification, job)
        result.error = "; ".join(verification.problems) + (f". {remedy}" if remedy else "")
    return result


def _open(module, path, conversion):
    """The artifact in its runtime, taking what Keras takes: behind the front-end the format carries as data
    (`zoo.deploy.formats.text_front`), which encodes the raw strings."""
    from zoo.deploy.formats import text_front

    if conversion.front is None:
        return module.open_runner(path, example=conversion.example())
    return text_front.wrap(module.open_runner(path, example=None), conversion.front)


def _serve(inbox: Connection, outbox: Connection) -> None:
    while True:
        try:
            job = inbox.recv()
        except EOFError:
            return
        if job is None:
            return
        outbox.send(("done", execute(job, lambda partial: outbox.send(("converted", partial)))))


class ConversionProcess:
    """One child process serving jobs; replaced after a crash or a timeout."""

    def __init__(self, log_path=None):
        self._proc = None
        self._log_path = log_path  # the child's stdout and stderr (converter chatter), quoted on a crash

    def _start(self):
        # A fresh interpreter (`python -m zoo.deploy.export.isolation`), not multiprocessing's spawn: spawn
        # re-imports the caller's main module, which reruns an unguarded user script.
        parent_r, child_w = os.pipe()
        child_r, parent_w = os.pipe()
        # The converters are TensorFlow's: the child runs the TensorFlow backend whatever the parent's (a model
        # trained on JAX or PyTorch reaches it as a `.keras` file and a SavedModel written on TensorFlow).
        env = tensorflow_env()
        self._log = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "zoo.deploy.export.isolation", str(child_r), str(child_w)],
            pass_fds=(child_r, child_w), env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
        )
        os.close(child_r)
        os.close(child_w)
        self._conn = Connection(parent_r, writable=False)
        self._send = Connection(parent_w, readable=False)

    def run(self, job: Job, timeout_s: float) -> ArtifactResult:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        self._send.send(job)
        partial, start = None, time.monotonic()
        while True:
            try:
                if self._conn.poll(0.5):
                    kind, payload = self._conn.recv()
                    if kind == "done":
                        return payload
                    partial = payload
                    continue
            except (EOFError, ConnectionError):
                pass  # the child died mid-message; handled below
            alive = self._proc.poll() is None
            if not alive or time.monotonic() - start > timeout_s:
                return self._died(job, partial, timeout_s if alive else None)

    def _died(self, job: Job, partial: ArtifactResult | None, timed_out_after) -> ArtifactResult:
        if timed_out_after is not None:
            self._proc.kill()
            reason = f"timed out after {timed_out_after:.0f} s"
        else:
            code = self._proc.returncode
            reason = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exited with {code}"
        self._proc.wait(10)
        self._close_pipes()
        tail = self._log_tail()
        if tail:
            reason += f" (last output: {tail})"
        if partial is None:
            target = job.target
            return ArtifactResult(format=target.format, variant=target.variant, precision=target.precision,
                                  options=dict(target.options), error=f"converter process {reason}")
        return dataclasses.replace(partial, status=FAILED_VERIFICATION,
                                   error=f"runtime process {reason} during verification")

    def _log_tail(self, lines: int = 3) -> str:
        if not self._log_path or not os.path.exists(self._log_path):
            return ""
        text = Path(self._log_path).read_text(errors="replace").strip().splitlines()
        return " | ".join(line.strip()[:200] for line in text[-lines:])

    def _close_pipes(self):
        for conn in (self._conn, self._send):
            conn.close()
        if self._log is not subprocess.DEVNULL:
            self._log.close()
        self._proc = None

    def close(self):
        if self._proc is None:
            return
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._send.send(None)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._close_pipes()


class InProcess:
    """Same interface without isolation (debugging: breakpoints work; a crash takes the caller down)."""

    def run(self, job: Job, timeout_s: float) -> ArtifactResult:
        return execute(job)

    def close(self):
        pass


if __name__ == "__main__":
    from zoo import lean_imports

    lean_imports.hold_back()  # before the first job imports TensorFlow (the child runs its backend only)
    _serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
