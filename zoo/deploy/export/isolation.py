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


from zoo import native_logs
from zoo.child_process import backend_env
from zoo.deploy.formats import memory
from zoo.deploy.export.results import EXPORTED, FAILED_VERIFICATION, PASSED, ArtifactResult
from zoo.deploy.formats.jobs import CannotVerify, Job


def artifact_size(path, companions=()) -> int:
    """Bytes of the model's files (`companions`, such as a TF.js folder's web page, are not the model), an ONNX
    model's external-data file included."""
    from zoo.deploy.formats.onnx import data_file

    path = Path(path)
    if path.is_file():
        return path.stat().st_size + (data_file(path).stat().st_size if data_file(path).is_file() else 0)
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
                            options=dict(target.options), via=target.route)
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

    def __init__(self, log_path=None, backend: str = "tensorflow"):
        self._backend = backend  # the Keras backend of the child: its route's (`zoo.deploy.formats.routes`)
        self._proc = None
        self._reaped_peak = None
        self._inherited_peak = 0
        self._log_path = log_path  # the child's stdout and stderr (converter chatter), quoted on a crash

    def _start(self):
        # A fresh interpreter (`python -m zoo.deploy.export.isolation`), not multiprocessing's spawn: spawn
        # re-imports the caller's main module, which reruns an unguarded user script.
        parent_r, child_w = os.pipe()
        child_r, parent_w = os.pipe()
        # The child runs its route's backend whatever the parent's: TensorFlow's converters for a model trained on
        # JAX or PyTorch (it reaches them as a `.keras` file and a SavedModel written on TensorFlow), PyTorch's
        # exporters on the torch route.
        env = backend_env(self._backend)
        self._reaped_peak = None
        # Linux starts the child's ru_maxrss at this process's own peak (exec(2) keeps the forked memory's high-water
        # mark): a reaped peak at or below it is this process's, not the child's (`_alive`).
        self._inherited_peak = memory.peak_rss(os.getpid()) or 0
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
        available = memory.available_bytes()
        need = memory.need(job.target.format, job.target.options, job.model.weight_bytes, available)[0] \
            if job.model.weight_bytes else None
        if self._alive() and need is not None and need > (available or need):
            self.close()  # what earlier jobs left resident is freed: a fresh child for a job that needs the room
            available = memory.available_bytes()
        warning = memory.fit_warning(job.target.label, need, available) if need else None
        if not self._alive():
            self._start()
        memory.reset_peak(self._proc.pid)
        self._send.send(job)
        partial, start, peak = None, time.monotonic(), None
        while True:
            try:
                if self._conn.poll(0.5):
                    kind, payload = self._conn.recv()
                    if kind == "done":
                        payload.peak_rss_bytes = _larger(peak, memory.peak_rss(self._proc.pid))
                        payload.memory_estimate_bytes = need
                        payload.notes[:0] = [warning] if warning else []
                        return payload
                    partial = payload
                    continue
            except (EOFError, ConnectionError):
                pass  # the child died mid-message; handled below
            peak = _larger(peak, memory.peak_rss(self._proc.pid))
            alive = self._alive()
            if not alive or time.monotonic() - start > timeout_s:
                result = self._died(job, partial, timeout_s if alive else None, _larger(peak, self._reaped_peak))
                result.peak_rss_bytes, result.memory_estimate_bytes = _larger(peak, self._reaped_peak), need
                result.notes[:0] = [warning] if warning else []
                return result

    def _alive(self) -> bool:
        """Whether the child runs; a dead one is reaped here with `os.wait4`, whose `ru_maxrss` is its peak."""
        if self._proc is None or self._proc.returncode is not None:
            return False
        try:
            pid, status, usage = os.wait4(self._proc.pid, os.WNOHANG)
        except ChildProcessError:
            return self._proc.poll() is None
        if pid == 0:
            return True
        self._proc.returncode = os.waitstatus_to_exitcode(status)
        reaped = usage.ru_maxrss * 1024  # KiB on Linux (getrusage(2))
        self._reaped_peak = reaped if reaped > self._inherited_peak else None
        return False

    def _died(self, job: Job, partial: ArtifactResult | None, timed_out_after, peak=None) -> ArtifactResult:
        during = "converter" if partial is None else "runtime"
        oom = False
        if timed_out_after is not None:
            self._proc.kill()
            reason = f"timed out after {timed_out_after:.0f} s"
        else:
            code = self._proc.returncode
            oom = code == -signal.SIGKILL  # not sent here: the kernel's out-of-memory killer sends SIGKILL
            reason = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exited with {code}"
        self._proc.wait(10)
        self._close_pipes()
        if oom:
            error = memory.out_of_memory(job, peak, during + (" during verification" if partial else ""))
        else:
            tail = self._log_tail()
            error = f"{during} process {reason}" + (f" (last output: {tail})" if tail else "") + \
                (" during verification" if partial is not None else "")
        if partial is None:
            target = job.target
            return ArtifactResult(format=target.format, variant=target.variant, precision=target.precision,
                                  options=dict(target.options), error=error, via=target.route)
        return dataclasses.replace(partial, status=FAILED_VERIFICATION, error=error)

    def _log_tail(self, lines: int = 3) -> str:
        """The child's last lines, less TensorFlow's start-up records (`zoo.native_logs`), which say nothing of
        the crash."""
        if not self._log_path or not os.path.exists(self._log_path):
            return ""
        text = native_logs.drop_records(Path(self._log_path).read_text(errors="replace"), 2)
        text = [line for line in text.strip().splitlines() if line.strip() and not _start_up_line(line)]
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
        if self._alive():
            with contextlib.suppress(OSError):
                self._send.send(None)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._close_pipes()


def _larger(a, b):
    return max(v for v in (a, b) if v is not None) if a is not None or b is not None else None


def _start_up_line(line: str) -> bool:
    """TensorFlow's start-up lines that absl writes before logging is set up (`zoo.native_logs`), and the CPU
    feature note's continuation."""
    return line.startswith((native_logs.PRE_INIT, "To enable the following instructions")) or \
        "failed call to cuInit" in line


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
