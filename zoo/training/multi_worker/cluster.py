"""Who the workers are: the cluster from the environment, checked before TensorFlow or JAX reads it, and which
task is the chief.

TensorFlow reads `TF_CONFIG`; JAX reads the variables `keras.distribution.initialize` reads (`JAX_ENV`).
"""

from __future__ import annotations

import json
import os

from zoo.errors import ZooError

DEFAULT_TIMEOUT_S = 120.0  # override with $ZOO_WORKER_TIMEOUT_S
# The variables `keras.distribution.initialize` reads: the coordinator first (or every address, comma
# separated), the number of processes, this process's index.
JAX_ENV = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES", "KERAS_DISTRIBUTION_PROCESS_ID")


def worker_timeout_s() -> float:
    """How long a worker waits for the others to join: $ZOO_WORKER_TIMEOUT_S, else `DEFAULT_TIMEOUT_S`."""
    return float(os.environ.get("ZOO_WORKER_TIMEOUT_S", DEFAULT_TIMEOUT_S))


def parse_tf_config(text: str | None = None) -> dict:
    """The parsed TF_CONFIG (default: the environment's), checked field by field."""
    text = os.environ.get("TF_CONFIG") if text is None else text
    if not text:
        raise ZooError("strategy 'multi_worker' needs TF_CONFIG describing the cluster and this task.")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise ZooError(f"TF_CONFIG is not valid JSON ({e}). Received: {text[:200]!r}") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict):
        raise ZooError(f"TF_CONFIG needs a 'cluster' object, e.g. {{'worker': ['127.0.0.1:12345', ...]}}. Received: {text[:200]!r}")
    task = config.get("task")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ZooError(f"TF_CONFIG needs a 'task' with 'type' and 'index'. Received: task={task!r}")
    cluster = config["cluster"]
    jobs = cluster.get(task["type"])
    if not isinstance(jobs, list):
        raise ZooError(f"TF_CONFIG task type {task['type']!r} is not a job of the cluster {sorted(cluster)}.")
    if not isinstance(task["index"], int) or not 0 <= task["index"] < len(jobs):
        raise ZooError(f"TF_CONFIG task index {task['index']!r} is out of range for {len(jobs)} {task['type']} task(s).")
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses:
            raise ZooError(f"TF_CONFIG cluster job {job!r} must list 'host:port' addresses. Received: {addresses!r}")
        for address in addresses:
            host, sep, port = str(address).rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ZooError(f"TF_CONFIG address {address!r} (job {job!r}) is not 'host:port'.")
    return config


def parse_jax_env(env=None) -> tuple[str, int, int]:
    """(coordinator address, process count, this process's index) from `JAX_ENV`, checked."""
    env = os.environ if env is None else env
    missing = [name for name in JAX_ENV if not env.get(name)]
    if missing:
        raise ZooError(f"strategy 'multi_worker' on JAX needs {', '.join(JAX_ENV)} (the coordinator's host:port, the "
                       f"number of processes, this one's index; as keras.distribution.initialize reads them). "
                       f"Missing: {', '.join(missing)}. `zoo train --workers N` sets them for local workers.")
    addresses, count, index = (env[name].strip() for name in JAX_ENV)
    coordinator = addresses.split(",")[0].strip()
    host, sep, port = coordinator.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ZooError(f"{JAX_ENV[0]} must start with the coordinator's 'host:port'. Received: {addresses!r}")
    if not count.isdigit() or int(count) < 1:
        raise ZooError(f"{JAX_ENV[1]} must be a positive integer. Received: {count!r}")
    if not index.isdigit() or not int(index) < int(count):
        raise ZooError(f"{JAX_ENV[2]} must be an integer in [0, {count}). Received: {index!r}")
    if "," in addresses and len(addresses.split(",")) != int(count):
        raise ZooError(f"{JAX_ENV[0]} lists {len(addresses.split(','))} addresses for {count} processes.")
    return coordinator, int(count), int(index)


def is_chief(strategy) -> bool:
    """True for the task that writes checkpoints, logs and exports (always, outside multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not hasattr(strategy.extended, "_in_multi_worker_mode"):
        return True
    if not strategy.extended._in_multi_worker_mode():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return not has_chief and task_type == "worker" and task_id == 0
