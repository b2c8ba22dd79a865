"""Joining the cluster within a deadline, and naming the worker that left it.

TensorFlow: `create_strategy()` builds `MultiWorkerMirroredStrategy`, ending the process within `timeout_s`
(naming the unreachable workers) instead of waiting forever for a worker that never comes up. While
training, a dead peer is found by TensorFlow's coordination service heartbeat where it runs one, else by
the strategy's health check (every `HEALTH_CHECK_S` seconds here); either aborts the collectives, and the
run stops naming the dead worker (`dead_worker`).

JAX: `initialize_jax()` joins the processes through `jax.distributed.initialize` within `timeout_s`. The
coordination service's heartbeat (`HEARTBEAT_S`) ends every process when one dies, naming it.
"""

from __future__ import annotations

import os
import sys
import time

from zoo.errors import ZooError
from zoo.training.multi_worker import watchdog
from zoo.training.multi_worker.cluster import JAX_ENV, parse_jax_env, parse_tf_config, worker_timeout_s
from zoo.training.multi_worker.keras_fixes import apply_keras_fixes

HEALTH_CHECK_S = 5  # TensorFlow: seconds between peer checks (TF's own default, 30, can take 60 s to notice)
HEARTBEAT_S = 10  # JAX: a process silent this long is dead (jax.distributed's default is 100 s)


def create_strategy(timeout_s: float | None = None):
    """`MultiWorkerMirroredStrategy` from TF_CONFIG, or a clear error within `timeout_s`.

    The strategy's constructor waits for every worker with no deadline of its
    own (and holds the GIL meanwhile). A watchdog process ends this one after
    `timeout_s`, printing which workers never came up; the exit status is then
    that of SIGKILL (-9, shells show 137).
    """
    import tensorflow as tf
    from tensorflow.python.distribute import collective_all_reduce_strategy

    config = parse_tf_config()
    timeout_s = worker_timeout_s() if timeout_s is None else timeout_s
    apply_keras_fixes()
    # A dead peer is found by TF's health check thread, which then aborts the collectives (the survivors'
    # `fit` raises UnavailableError naming it). Its defaults (every 30 s, 3 tries of 10 s) can take a
    # minute; a refused connection to a killed worker fails at once, so checking often costs nothing.
    collective_all_reduce_strategy.CollectiveAllReduceExtended._check_health_interval = HEALTH_CHECK_S
    me = config["cluster"][config["task"]["type"]][config["task"]["index"]]
    peers = [a for addresses in config["cluster"].values() for a in addresses if a != me]
    message = (
        f"error: multi_worker: worker(s) {{missing}} did not join within {timeout_s:g} s "
        f"(this task: {config['task']['type']} {config['task']['index']} at {me}). Start every task listed in "
        "TF_CONFIG, or set ZOO_WORKER_TIMEOUT_S to wait longer."
    )
    guard = watchdog.start(timeout_s, message, peers)
    try:
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout_s)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        raise ZooError(f"multi_worker: cannot start the cluster from TF_CONFIG: {e}") from e
    finally:
        guard.stdin.close()
        guard.wait()


def dead_worker(error: BaseException) -> str | None:
    """The worker a TensorFlow collective error says is down (`/job:worker/replica:0/task:1`), or None where
    the error is not a collective's."""
    import re

    text = str(error)
    found = (re.search(r"(/job:\w+/replica:\d+/task:\d+) is down", text)  # the health check's verdict
             or re.search(r"stopped sending heartbeats\):\s*(/job:\w+/replica:\d+/task:\d+)", text)  # the
             # coordination service's, where TensorFlow runs one (it then replaces the health check)
             or re.search(r"from remote target (/job:\w+/replica:\d+/task:\d+)", text))  # a collective's peer
    if found:
        return found.group(1)
    return "a peer worker" if "Collective ops is aborted" in text else None


# -- JAX -------------------------------------------------------------------------------------------


def await_jax_verdict(error: BaseException) -> str | None:
    """After a cross-process collective failed (Gloo: "Connection reset by peer"): waits for the coordination
    service to name the process that stopped. When its heartbeat check finds it (`HEARTBEAT_S`), the service
    ends every other process itself, with "The following tasks are unhealthy (stopped sending heartbeats):
    <index>"; this returns only if that has not happened by then (None: the error is another one)."""
    text = str(error)
    if "Gloo" not in text and "UNAVAILABLE" not in text and "heartbeat" not in text:
        return None
    print(f"error: multi_worker: a cross-process collective failed ({text.splitlines()[0][:300]}); a peer process has "
          f"probably stopped. Waiting up to {2 * HEARTBEAT_S} s for the coordination service to name it.",
          file=sys.stderr, flush=True)
    time.sleep(2 * HEARTBEAT_S + 5)
    return "a peer process"


def initialize_jax(timeout_s: float | None = None) -> tuple[int, int]:
    """Joins this process to the others through `jax.distributed` (see the module docstring); returns
    (process index, process count). Call before JAX computes anything.

    Every process waits for all the others to register with the coordinator (process 0). A watchdog
    ends this one after `timeout_s` with a message naming what is missing, as for TensorFlow. On CPU the
    processes exchange gradients through Gloo (`jax_cpu_collectives_implementation`).
    """
    import jax

    coordinator, count, index = parse_jax_env()
    timeout_s = worker_timeout_s() if timeout_s is None else timeout_s
    if jax.distributed.is_initialized():
        return jax.process_index(), jax.process_count()
    if not any(p in os.environ.get("JAX_PLATFORMS", "cpu") for p in ("cuda", "gpu", "tpu", "rocm")):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    who = "the other processes" if index == 0 else f"the coordinator (process 0) at {coordinator}"
    message = (f"error: multi_worker: process {index} of {count} did not see {who} join within {timeout_s:g} s "
               f"(coordinator {coordinator}). Start every process with the same {JAX_ENV[0]} and "
               f"{JAX_ENV[1]}, or set ZOO_WORKER_TIMEOUT_S to wait longer.")
    guard = watchdog.start(timeout_s, message, [coordinator] if index else [])
    try:
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=count, process_id=index,
                                   initialization_timeout=int(timeout_s) + 60, heartbeat_timeout_seconds=HEARTBEAT_S)
    finally:
        guard.stdin.close()
        guard.wait()
    from keras.src.backend.jax.distribution_lib import initialize_rng

    initialize_rng()  # one seed for every process where none was set (as keras.distribution.initialize does)
    return index, count
