"""Multi-worker training on TensorFlow and JAX: the cluster from the environment, a bounded wait for the
other workers, a dead worker that stops the others, the Keras 3 fixes `fit` needs, and a local launcher.

TensorFlow (`MultiWorkerMirroredStrategy`):

- `parse_tf_config()` validates `TF_CONFIG` before TensorFlow sees it.
- `create_strategy()` builds the strategy, ending the process within `timeout_s` (naming the
  unreachable workers) instead of waiting forever for a worker that never comes up. While training,
  a dead peer is found by TensorFlow's coordination service heartbeat where it runs one, else by
  the strategy's health check (every `HEALTH_CHECK_S` seconds here); either aborts the collectives,
  and the run stops naming the dead worker (`dead_worker`).
- `apply_keras_fixes()` patches two bugs in Keras' TF trainer that break
  `fit` under `MultiWorkerMirroredStrategy` (keras-team/keras#20585); each
  patch is applied only while the broken code is detected in the installed
  Keras, so it becomes a no-op once Keras fixes it upstream.

JAX (`keras.distribution.DataParallel` over the devices of several processes):

- `initialize_jax()` joins the processes through `jax.distributed.initialize`, with the coordinator
  address, process count and index from the variables Keras reads (`JAX_ENV`, as
  `keras.distribution.initialize` does), within `timeout_s`. The coordination service's heartbeat
  (`HEARTBEAT_S`) ends every process when one dies, naming it.

Both: `launch(argv, workers)` starts N local `zoo train` workers on 127.0.0.1 with free ports
(`zoo train --workers N`), and when one dies, gives the others `GRACE_S` to stop on their own before
stopping them; it names the dead worker.
"""

from __future__ import annotations

import inspect
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from zoo.errors import ZooError

DEFAULT_TIMEOUT_S = 120.0  # override with $ZOO_WORKER_TIMEOUT_S
HEALTH_CHECK_S = 5  # TensorFlow: seconds between peer checks (TF's own default, 30, can take 60 s to notice)
HEARTBEAT_S = 10  # JAX: a process silent this long is dead (jax.distributed's default is 100 s)
GRACE_S = 45.0  # the launcher: how long the others get to stop on their own after one died
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


def _listening(address: str, timeout: float = 0.5) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


# Runs in a separate, TensorFlow-free process: while MultiWorkerMirroredStrategy waits for the
# other workers it holds the GIL, so no thread of this process could time it out.
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


def _watchdog(timeout: float, message: str, peers: list[str]) -> subprocess.Popen:
    """A TensorFlow- and JAX-free process that ends this one after `timeout` s, printing `message` (with
    the unreachable `peers` for {missing}), unless its stdin is closed first (see `_WATCHDOG`)."""
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(timeout), message, *peers],
                            stdin=subprocess.PIPE, text=True)


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
    watchdog = _watchdog(timeout_s, message, peers)
    try:
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout_s)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        raise ZooError(f"multi_worker: cannot start the cluster from TF_CONFIG: {e}") from e
    finally:
        watchdog.stdin.close()
        watchdog.wait()


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
    watchdog = _watchdog(timeout_s, message, [coordinator] if index else [])
    try:
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=count, process_id=index,
                                   initialization_timeout=int(timeout_s) + 60, heartbeat_timeout_seconds=HEARTBEAT_S)
    finally:
        watchdog.stdin.close()
        watchdog.wait()
    from keras.src.backend.jax.distribution_lib import initialize_rng

    initialize_rng()  # one seed for every process where none was set (as keras.distribution.initialize does)
    return index, count


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


# -- Keras fixes (keras-team/keras#20585) -------------------------------------------------------


def _trainer_module():
    from keras.src.backend.tensorflow import trainer

    return trainer


def symbolic_build_is_broken(trainer=None) -> bool:
    """Keras 3's `_maybe_symbolic_build` reduces the first distributed batch with
    `strategy.reduce("MEAN", batch, axis=None)`, which `MultiWorkerMirroredStrategy`
    cannot do eagerly ("Attempt to convert a value (PerReplica...) to a Tensor"),
    so `fit` fails before the first step (keras-team/keras#20585)."""
    trainer = trainer or _trainer_module()
    source = _unfixed_source(getattr(trainer.TensorFlowTrainer, "_maybe_symbolic_build", None))
    return source is not None and "distribute_strategy.reduce(" in source


def scalar_reduce_is_broken(trainer=None) -> bool:
    """Keras 3's `reduce_per_replica` reduces every multi-worker value with
    `strategy.reduce("MEAN", v, axis=0)`, which fails on the scalar loss and
    metrics ("Invalid reduction dimension 0 for input with 0 dimensions")."""
    trainer = trainer or _trainer_module()
    source = _unfixed_source(getattr(trainer, "reduce_per_replica", None))
    return source is not None and 'strategy.reduce("MEAN", v, axis=0)' in source and "_is_scalar(v)" not in source


def _unfixed_source(fn) -> str | None:
    """The source of Keras's `fn`, or None where it is missing, already ours, or unreadable."""
    if fn is None or getattr(fn, "_zoo_fix", False):
        return None
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return None


def apply_keras_fixes(trainer=None) -> list[str]:
    """Patches whichever of the two bugs the installed Keras still has; returns their names."""
    trainer = trainer or _trainer_module()
    applied = []
    if symbolic_build_is_broken(trainer):
        original = trainer.TensorFlowTrainer._maybe_symbolic_build

        def _maybe_symbolic_build(self, iterator=None, data_batch=None):
            strategy = self.distribute_strategy
            if iterator is None or self._distribute_strategy is None or not trainer._collective_all_reduce_multi_worker(strategy):
                return original(self, iterator=iterator, data_batch=data_batch)
            import tensorflow as tf

            # Only shapes and dtypes matter here: take this worker's first replica's batch.
            for _, _, it in iterator:
                batch = next(it)
                break
            data_batch = tf.nest.map_structure(
                lambda v: strategy.experimental_local_results(v)[0] if isinstance(v, tf.distribute.DistributedValues) else v,
                batch,
            )
            return original(self, iterator=None, data_batch=data_batch)

        _maybe_symbolic_build._zoo_fix = True
        _maybe_symbolic_build.__wrapped__ = original
        trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
        applied.append("symbolic_build")
    if scalar_reduce_is_broken(trainer):
        original_reduce = trainer.reduce_per_replica

        def reduce_per_replica(values, strategy, reduction):
            if not trainer._collective_all_reduce_multi_worker(strategy) or reduction not in ("auto", "mean"):
                return original_reduce(values, strategy, reduction)
            from keras.src import tree

            def reduce_one(v):
                if getattr(getattr(v, "shape", None), "rank", None) == 0:
                    return strategy.reduce("MEAN", v, axis=None)  # scalars: a plain cross-replica mean
                return original_reduce(v, strategy, reduction)

            return tree.map_structure(reduce_one, values)

        reduce_per_replica._zoo_fix = True
        reduce_per_replica.__wrapped__ = original_reduce
        trainer.reduce_per_replica = reduce_per_replica
        applied.append("scalar_reduce")
    return applied


# -- local launcher -----------------------------------------------------------------------------


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
