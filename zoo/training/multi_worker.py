"""Multi-worker training: TF_CONFIG checks, the Keras 3 fixes `fit` needs, and a local launcher.

- `parse_tf_config()` validates `TF_CONFIG` before TensorFlow sees it.
- `create_strategy()` builds `MultiWorkerMirroredStrategy`, ending the
  process within `timeout_s` (naming the unreachable workers) instead of
  waiting forever for a worker that never comes up.
- `apply_keras_fixes()` patches two bugs in Keras' TF trainer that break
  `fit` under `MultiWorkerMirroredStrategy` (keras-team/keras#20585); each
  patch is applied only while the broken code is detected in the installed
  Keras, so it becomes a no-op once Keras fixes it upstream.
- `launch(argv, workers)` starts N local `zoo train` workers on 127.0.0.1
  with free ports (`zoo train --workers N`).
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


def create_strategy(timeout_s: float | None = None):
    """`MultiWorkerMirroredStrategy` from TF_CONFIG, or a clear error within `timeout_s`.

    The strategy's constructor waits for every worker with no deadline of its
    own (and holds the GIL meanwhile). A watchdog process ends this one after
    `timeout_s`, printing which workers never came up; the exit status is then
    that of SIGKILL (-9, shells show 137).
    """
    import tensorflow as tf

    config = parse_tf_config()
    timeout_s = float(os.environ.get("ZOO_WORKER_TIMEOUT_S", DEFAULT_TIMEOUT_S)) if timeout_s is None else timeout_s
    apply_keras_fixes()
    me = config["cluster"][config["task"]["type"]][config["task"]["index"]]
    peers = [a for addresses in config["cluster"].values() for a in addresses if a != me]
    message = (
        f"error: multi_worker: worker(s) {{missing}} did not join within {timeout_s:g} s "
        f"(this task: {config['task']['type']} {config['task']['index']} at {me}). Start every task listed in "
        "TF_CONFIG, or set ZOO_WORKER_TIMEOUT_S to wait longer."
    )
    watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(timeout_s), message, *peers],
                                stdin=subprocess.PIPE, text=True)
    try:
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout_s)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        raise ZooError(f"multi_worker: cannot start the cluster from TF_CONFIG: {e}") from e
    finally:
        watchdog.stdin.close()
        watchdog.wait()


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


def local_tf_configs(workers: int) -> list[str]:
    """One TF_CONFIG per worker of a loopback cluster on free ports; worker 0 is the chief."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer. Received: workers={workers!r}")
    addresses = [f"127.0.0.1:{p}" for p in free_ports(workers)]
    return [json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": i}}) for i in range(workers)]


def launch(train_args: list[str], workers: int, timeout_s: float | None = None) -> int:
    """Runs `zoo train *train_args --strategy multi_worker` as `workers` local processes.

    Worker 0 (the chief) prints to this terminal; the others' output is shown
    only if they fail. Returns 0 when every worker exits 0; when one fails, the
    others are stopped and its exit code is returned.
    """
    configs = local_tf_configs(workers)
    procs, logs = [], []
    for i, tf_config in enumerate(configs):
        env = dict(os.environ, TF_CONFIG=tf_config)
        cmd = [sys.executable, "-m", "zoo.cli", "train", *train_args, "--strategy", "multi_worker"]
        log = None if i == 0 else tempfile.TemporaryFile("w+")  # a file, not a pipe: never blocks the worker
        logs.append(log)
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=log, text=True))
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    codes: list[int | None] = [None] * workers
    failed = None
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            if codes[i] is None and p.poll() is not None:
                codes[i] = p.returncode
                if p.returncode != 0 and failed is None:
                    failed = i
        if failed is not None or (deadline is not None and time.monotonic() > deadline):
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
        return codes[failed] or 1
    if deadline is not None and any(c != 0 for c in codes):
        print(f"error: workers did not finish within {timeout_s:g} s", file=sys.stderr)
        return 1
    return 0
