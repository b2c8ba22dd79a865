"""The one place that builds a distribution strategy from a name, on each Keras backend.

Modelled on Model Garden's `get_distribution_strategy`. Each backend has its own engine:

- TensorFlow: `tf.distribute` (`mirrored` over local devices, `multi_worker` across processes through
  `TF_CONFIG`, `tpu`); `data_parallel` is `mirrored` there.
- JAX: `keras.distribution.DataParallel` (https://keras.io/api/distribution/): `data_parallel` over
  every local device, `multi_worker` over every device of several processes joined through
  `jax.distributed` (`zoo.training.multi_worker`).
- PyTorch: one device. Keras 3.15 has no distribution for PyTorch (`keras.distribution` runs on
  JAX and TensorFlow), so the other strategies are refused, saying so.

TensorFlow and JAX are imported inside the functions, so the strategy names (`STRATEGIES`, the
choices of the `strategy` knob) cost nothing to import: `zoo train --help` does not load them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from typing import TYPE_CHECKING

from zoo.errors import UnknownNameError, ZooError
from zoo.training import multi_worker

if TYPE_CHECKING:
    import tensorflow as tf

STRATEGIES = ("auto", "one_device", "data_parallel", "mirrored", "multi_worker", "tpu", "parameter_server")

# The strategies each backend trains with, as data; `strategy()` refuses the rest, naming the backend.
BACKEND_STRATEGIES = {
    "tensorflow": ("auto", "one_device", "data_parallel", "mirrored", "multi_worker", "tpu"),
    "jax": ("auto", "one_device", "data_parallel", "multi_worker"),
    "torch": ("auto", "one_device"),
}
# What to use instead, where another backend's name for the same thing was given.
_INSTEAD = {("jax", "mirrored"): "data_parallel"}


def split_cpu(n: int) -> list:
    """Splits the physical CPU into `n` logical devices, before the backend initializes them.

    This is how data-parallel training is exercised without GPUs: 2 logical CPUs give a real
    2-replica `MirroredStrategy` on TensorFlow, and 2 JAX CPU devices
    (`--xla_force_host_platform_device_count`) for `DataParallel` on JAX.
    """
    from zoo.training import backends

    if n < 1:
        raise ValueError(f"n must be >= 1. Received: n={n}")
    backend = backends.current()
    if backend == "jax":
        return _split_jax_cpu(n)
    if backend == "torch":
        raise ZooError(f"Cannot split the CPU into {n} devices on the torch backend: Keras has no distribution for "
                       "PyTorch (see zoo.training.distribute). Use --backend jax or tensorflow.")
    import tensorflow as tf

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


def _split_jax_cpu(n: int) -> list:
    import sys

    flag = f"--xla_force_host_platform_device_count={n}"
    if "jax" in sys.modules and _jax_started():
        import jax

        cpus = jax.devices("cpu")
        if len(cpus) == n:
            return cpus
        raise ZooError(f"Cannot split the CPU into {n} devices: JAX has started with {len(cpus)} CPU device(s). "
                       f"Set XLA_FLAGS={flag} before JAX starts (zoo train --cpu-replicas {n} does).")
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform")]
    os.environ["XLA_FLAGS"] = " ".join([*flags, flag])
    import jax

    return jax.devices("cpu")


def _jax_started() -> bool:
    """Whether JAX has initialized its backends (after which XLA_FLAGS are read no more)."""
    from jax._src import xla_bridge

    return bool(getattr(xla_bridge, "_backends", None))


@functools.lru_cache(maxsize=None)
def _mirrored(devices: tuple) -> tf.distribute.MirroredStrategy:
    # One instance per device set: two MirroredStrategy objects over the same CPUs in one
    # process reuse collective instance keys, and the second one's all-reduce then aborts
    # with "Shape mismatch in the collective instance".
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(devices=list(devices))


@dataclasses.dataclass
class KerasDistribution:
    """A strategy on JAX or PyTorch: a `keras.distribution` (JAX's `DataParallel`) or one device.

    It quacks like the part of `tf.distribute.Strategy` a run uses (`scope()`,
    `num_replicas_in_sync`). `distribution` is None on one device.
    """

    name: str
    distribution: object = None
    process_index: int = 0
    process_count: int = 1

    @property
    def num_replicas_in_sync(self) -> int:
        return 1 if self.distribution is None else len(self.distribution.device_mesh.devices.reshape(-1))

    @property
    def local_devices(self) -> int:
        return self.num_replicas_in_sync // self.process_count

    def scope(self):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def activated(self):
        """This distribution for everything the run builds and fits (Keras reads it globally)."""
        if self.distribution is None:
            yield
            return
        import keras

        previous = keras.distribution.distribution()
        keras.distribution.set_distribution(self.distribution)
        try:
            yield
        finally:
            keras.distribution.set_distribution(previous)


def strategy(name: str = "auto"):
    """A strategy by name, for the backend this process runs: one of `STRATEGIES`.

    - auto: TensorFlow: `MirroredStrategy` over all GPUs when any is visible, else the default strategy;
      JAX: `DataParallel` over all local accelerators when there are several, else one device;
      PyTorch: one device.
    - one_device: the first GPU, else the CPU.
    - data_parallel: JAX: `keras.distribution.DataParallel` over all local devices (CPU devices too:
      `split_cpu`); TensorFlow: `mirrored`.
    - mirrored (TensorFlow): `MirroredStrategy` over all GPUs, or else over all logical CPUs (`split_cpu`).
    - multi_worker: TensorFlow: `MultiWorkerMirroredStrategy` configured through `TF_CONFIG`; JAX:
      `DataParallel` over every device of the processes joined by `jax.distributed` (coordinator
      address, process count and index from the environment). See `zoo.training.multi_worker`:
      validation, a bounded wait for the other workers, a dead worker stops the others.
    - tpu (TensorFlow): `TPUStrategy` through `TPUClusterResolver`; a clear error where there is no TPU.
    - parameter_server: rejected: Keras 3's `fit` does not support it.
    """
    from zoo.training import backends

    if name not in STRATEGIES:
        raise UnknownNameError("strategy", name, STRATEGIES)
    if name == "parameter_server":
        raise ZooError(
            "strategy 'parameter_server' is not supported: Keras 3's model.fit does not train with "
            "ParameterServerStrategy (it needs the TF2 ClusterCoordinator loop). Use 'multi_worker' instead."
        )
    backend = backends.current()
    if name not in BACKEND_STRATEGIES[backend]:
        raise ZooError(_refusal(name, backend))
    if backend == "jax":
        return _jax_strategy(name)
    if backend == "torch":
        return KerasDistribution(name)
    return _tf_strategy(name)


def _refusal(name: str, backend: str) -> str:
    instead = _INSTEAD.get((backend, name))
    if instead:
        return (f"strategy {name!r} is TensorFlow's; on the {backend} backend the same (synchronous data "
                f"parallelism over local devices) is {instead!r}.")
    engines = [b for b, names in BACKEND_STRATEGIES.items() if name in names]
    why = ("Keras 3.15 has no distribution for PyTorch: keras.distribution runs on JAX and TensorFlow only"
           if backend == "torch" else f"it is a strategy of {' and '.join(engines)}")
    return (f"strategy {name!r} is not available on the {backend} backend ({why}). On {backend}: "
            f"{', '.join(BACKEND_STRATEGIES[backend])}; for {name!r} use --backend {' or --backend '.join(engines)}.")


def _jax_strategy(name: str) -> KerasDistribution:
    import jax
    import keras

    if name == "multi_worker":
        multi_worker.initialize_jax()  # before JAX computes anything; bounded, names who is missing
        devices = jax.devices()
        return KerasDistribution(name, keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False),
                                 jax.process_index(), jax.process_count())
    devices = jax.local_devices()
    accelerators = [d for d in devices if d.platform != "cpu"]
    if name == "one_device" or (name == "auto" and len(accelerators) < 2):
        return KerasDistribution(name)
    chosen = accelerators if name == "auto" else devices
    return KerasDistribution(name, keras.distribution.DataParallel(devices=chosen, auto_shard_dataset=False))


def _tf_strategy(name: str):
    import tensorflow as tf

    if name == "multi_worker":
        # Before anything lists devices: the cluster must be set up before TF initializes.
        # Checks TF_CONFIG, patches Keras' fit where still needed, fails in bounded time.
        return _multi_worker()
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        return _mirrored(tuple(d.name for d in gpus)) if gpus else tf.distribute.get_strategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name in ("mirrored", "data_parallel"):
        devices = tuple(d.name for d in (gpus or tf.config.list_logical_devices("CPU")))
        return _mirrored(devices)
    try:  # tpu
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        raise ZooError(f"strategy 'tpu': no TPU found ({e}). Use 'auto' or 'mirrored' on this machine.") from e
    return tf.distribute.TPUStrategy(resolver)


_MULTI_WORKER = None


def _multi_worker():
    # One per process: TF's collective ops can be configured only once.
    global _MULTI_WORKER
    if _MULTI_WORKER is None:
        _MULTI_WORKER = multi_worker.create_strategy()
    return _MULTI_WORKER


def activated(strategy):
    """The context a whole run (build, fit, evaluate) runs in: JAX's distribution set for Keras; nothing
    on TensorFlow, whose strategy is entered by `strategy.scope()` around the build only."""
    return strategy.activated() if isinstance(strategy, KerasDistribution) else contextlib.nullcontext()


def is_multi_worker(strategy) -> bool:
    """Whether several processes train together."""
    if isinstance(strategy, KerasDistribution):
        return strategy.process_count > 1
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and strategy.extended._in_multi_worker_mode()


def is_chief(strategy) -> bool:
    """Whether this task writes files (checkpoints, logs, exports): always, except non-chief workers."""
    if isinstance(strategy, KerasDistribution):
        return strategy.process_index == 0
    return multi_worker.is_chief(strategy) if is_multi_worker(strategy) else True


def feed(strategy, ds, training: bool):
    """This process's batches of `ds` under `strategy`.

    Under JAX's `DataParallel` each process gives Keras its own rows of every global batch (`ArrayBatches.shard`;
    `jax.make_array_from_process_local_data` puts them together), and every batch must split evenly over the
    devices: evaluation batches are padded with rows of sample weight 0 (metrics count the real rows only),
    training batches keep whole multiples (the remainder rows of a last, partial batch are left out).
    TensorFlow's strategies split `tf.data` batches themselves.
    """
    if ds is None or not isinstance(strategy, KerasDistribution) or strategy.distribution is None:
        return ds
    from zoo.data.array_batches import ArrayBatches

    if not isinstance(ds, ArrayBatches):
        raise ZooError(f"strategy {strategy.name!r} on JAX feeds batches held in memory (zoo.data.batches."
                       f"ArrayBatches); got a {type(ds).__name__}. Data that only streams through tf.data trains on "
                       "one device on JAX, or with --backend tensorflow.")
    devices = strategy.num_replicas_in_sync
    if ds.batching.batch_size % devices:
        raise ZooError(f"batch_size {ds.batching.batch_size} does not split over {devices} devices: give a "
                       f"multiple of {devices} (--batch-size).")
    return ds.shard(strategy.process_index, strategy.process_count, pad_to=None if training else devices,
                    trim_to=devices if training else None)
