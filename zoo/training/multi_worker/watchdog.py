"""A deadline for a wait that holds the GIL: a separate, TensorFlow- and JAX-free process that ends this one.

While `MultiWorkerMirroredStrategy` (or `jax.distributed.initialize`) waits for the other workers it holds
the GIL, so no thread of this process could time it out.
"""

from __future__ import annotations

import os
import subprocess
import sys

_WATCHDOG = r"""
import os, select, signal, socket, sys
parent, timeout, message, peers = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:]
ready, _, _ = select.select([sys.stdin], [], [], timeout)
if ready and sys.stdin.read(1) == "":
    sys.exit(0)  # the parent closed the pipe: the cluster is up (or it failed on its own)
def listening(address):
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=0.5).close()
        return True
    except OSError:
        return False
missing = [a for a in peers if not listening(a)] or peers
sys.stderr.write(message.replace("{missing}", ", ".join(missing)) + "\n")
sys.stderr.flush()
os.kill(parent, signal.SIGKILL)
"""


def start(timeout: float, message: str, peers: list[str]) -> subprocess.Popen:
    """A TensorFlow- and JAX-free process that ends this one after `timeout` s, printing `message` (with
    the unreachable `peers` for {missing}), unless its stdin is closed first (see `_WATCHDOG`)."""
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(timeout), message, *peers],
                            stdin=subprocess.PIPE, text=True)
