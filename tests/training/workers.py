"""Killing a worker of a `zoo train --workers 2` run mid-epoch, and running the same command again
(tests/training/test_strategies.py on TensorFlow, test_backends.py on JAX)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def state(path):
    with np.load(path) as data:
        return json.loads(str(data["meta"]))


def kill_one_mid_epoch(args, env, cwd, state_file, at_step):
    """Starts `zoo train --workers 2 ...`, SIGKILLs worker 1 once the chief's backup is past `at_step` (mid-epoch),
    and returns (seconds until every process stopped, the launcher's output, the backup's position)."""
    proc = subprocess.Popen([sys.executable, "-m", "zoo.cli", "train", "--workers", "2", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = ""
    while not first.startswith("launched"):  # "launched 2 jax workers: worker 0 pid N, worker 1 pid M"
        first = proc.stdout.readline()
        assert first, "the launcher ended before starting its workers"
    pids = [int(part.rsplit(" ", 1)[1]) for part in first.strip().split(": ", 1)[1].split(", ")]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if state_file.is_file() and state(state_file)["global_step"] >= at_step:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before a worker could be killed"
    os.kill(pids[1], signal.SIGKILL)
    killed = time.monotonic()
    output, _ = proc.communicate(timeout=120)
    for pid in pids:  # no worker left behind
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    return time.monotonic() - killed, first + output, state(state_file)


def rerun(args, env, cwd):
    r = subprocess.run([sys.executable, "-m", "zoo.cli", "train", "--workers", "2", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-4000:])
    return r.stdout
