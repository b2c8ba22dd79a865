"""The one place that builds `tf.distribute` strategies from a name.

Modelled on Model Garden's `get_distribution_strategy`. TensorFlow is imported inside the functions,
so the strategy names (`STRATEGIES`, the choices of the `strategy` knob) cost nothing to import:
`zoo train --help` does not load TensorFlow.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from zoo.errors import UnknownNameError, ZooError
from zoo.training import multi_worker

if TYPE_CHECKING:
    import tensorflow as tf

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu", "parameter_server")


def split_cpu(n: int) -> list:
    """Splits the physical CPU into `n` logical devices (before TF initializes them).

    This is how mirrored training is exercised without GPUs: 2 logical CPUs
    give a real 2-replica `MirroredStrategy`.
    """
    import tensorflow as tf

    if n < 1:
        raise ValueError(f"n must be >= 1. Received: n={n}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is not None and len(current) == n:
        return tf.config.list_logical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError as e:
        raise ZooError(
            f"Cannot split the CPU into {n} logical devices: TensorFlow is already initialized "
            f"({len(tf.config.list_logical_devices('CPU'))} CPU devices). Split it before building anything."
        ) from e
    return tf.config.list_logical_devices("CPU")


@functools.lru_cache(maxsize=None)
def _mirrored(devices: tuple) -> tf.distribute.MirroredStrategy:
    # One instance per device set: two MirroredStrategy objects over the same CPUs in one
    # process reuse collective instance keys, and the second one's all-reduce then aborts
    # with "Shape mismatch in the collective instance".
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(devices=list(devices))


def strategy(name: str = "auto") -> tf.distribute.Strategy:
    """A strategy by name: one of `STRATEGIES`.

    - auto: `MirroredStrategy` over all GPUs when any is visible, else the default strategy.
    - one_device: `OneDeviceStrategy` on the first GPU, else the CPU.
    - mirrored: `MirroredStrategy` over all GPUs, or else over all logical CPUs (see `split_cpu`).
    - multi_worker: `MultiWorkerMirroredStrategy`, configured through `TF_CONFIG` (see
      `zoo.training.multi_worker`: validation, a bounded wait for the other workers, the Keras fixes).
    - tpu: `TPUStrategy` through `TPUClusterResolver`; a clear error where there is no TPU.
    - parameter_server: rejected: Keras 3's `fit` does not support it.
    """
    import tensorflow as tf

    if name not in STRATEGIES:
        raise UnknownNameError("strategy", name, STRATEGIES)
    if name == "multi_worker":
        # Before anything lists devices: the cluster must be set up before TF initializes.
        # Checks TF_CONFIG, patches Keras' fit where still needed, fails in bounded time.
        return _multi_worker()
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        return _mirrored(tuple(d.name for d in gpus)) if gpus else tf.distribute.get_strategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        devices = tuple(d.name for d in (gpus or tf.config.list_logical_devices("CPU")))
        return _mirrored(devices)
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, RuntimeError, tf.errors.OpError) as e:
            raise ZooError(f"strategy 'tpu': no TPU found ({e}). Use 'auto' or 'mirrored' on this machine.") from e
        return tf.distribute.TPUStrategy(resolver)
    raise ZooError(
        "strategy 'parameter_server' is not supported: Keras 3's model.fit does not train with "
        "ParameterServerStrategy (it needs the TF2 ClusterCoordinator loop). Use 'multi_worker' instead."
    )


_MULTI_WORKER = None


def _multi_worker():
    # One per process: TF's collective ops can be configured only once.
    global _MULTI_WORKER
    if _MULTI_WORKER is None:
        _MULTI_WORKER = multi_worker.create_strategy()
    return _MULTI_WORKER


def is_multi_worker(strategy) -> bool:
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and strategy.extended._in_multi_worker_mode()


def is_chief(strategy) -> bool:
    """Whether this task writes files (checkpoints, logs, exports): always, except non-chief workers."""
    return multi_worker.is_chief(strategy) if is_multi_worker(strategy) else True
