"""The Keras backend a run computes on: the `backend` knob, applied before Keras is imported.

Keras 3 runs the same model on TensorFlow, JAX or PyTorch and reads its backend once, when
`keras` is first imported: from `$KERAS_BACKEND`, else from `~/.keras/keras.json`, else TensorFlow
(https://keras.io/getting_started/#configuring-your-backend). So `zoo train --backend jax` sets
`$KERAS_BACKEND` before anything imports Keras, as `zoo.training.thread_pools` sets TensorFlow's
thread pool before TensorFlow starts. In a process that has already imported Keras with another
backend the choice cannot be honoured; `use` then says so instead of training on the wrong one.

TensorFlow stays the default: on CPU it trains zoo's models fastest (`benchmarks/backends.py`
measures the three side by side), and it is the only backend with `tf.distribute`'s strategies.

>>> from zoo.training import backends
>>> backends.use("jax")          # before `import keras`
'jax'
"""

from __future__ import annotations

import json
import os
import sys

from zoo.errors import UnknownNameError, ZooError

BACKENDS = ("tensorflow", "jax", "torch")
DEFAULT = "tensorflow"
_ALIASES = {"pytorch": "torch", "tf": "tensorflow"}


class BackendError(ZooError, RuntimeError):
    """The backend asked for is not the one this process runs, or cannot run here."""


def _keras_config_backend() -> str | None:
    """The backend `~/.keras/keras.json` (or `$KERAS_HOME/keras.json`) names, if any."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json")) as f:
            return json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        return None


def check_name(name: str) -> str:
    """`name` as Keras spells it (`pytorch` -> `torch`); an unknown name gets close names."""
    name = _ALIASES.get(str(name).lower(), str(name).lower())
    if name not in BACKENDS:
        raise UnknownNameError("Keras backend", name, BACKENDS)
    return name


def requested(name: str | None = None) -> str:
    """The backend a process started now would run: `name`, else $KERAS_BACKEND, else keras.json's, else TF."""
    return check_name(name or os.environ.get("KERAS_BACKEND") or _keras_config_backend() or DEFAULT)


def imported() -> str | None:
    """The backend of the Keras this process has imported, or None before `import keras`."""
    if "keras" not in sys.modules:
        return None
    import keras

    return keras.backend.backend()


def use(name: str | None = None) -> str:
    """Makes `name` (or $KERAS_BACKEND, ...) this process's Keras backend; returns it.

    Call before anything imports Keras. Where Keras is already imported with another backend this
    raises a `BackendError` that says how to get the one asked for.
    """
    wanted = requested(name)
    running = imported()
    if running is None:
        os.environ["KERAS_BACKEND"] = wanted
        return wanted
    if running != wanted:
        raise BackendError(
            f"backend {wanted!r} was asked for, but this process imported Keras with backend {running!r} "
            f"already, and Keras reads its backend once, at its first import. Start a new process with "
            f"KERAS_BACKEND={wanted} (or `zoo train --backend {wanted}`), or call "
            f"zoo.training.backends.use({wanted!r}) before anything imports keras."
        )
    return running


def current() -> str:
    """The backend this process computes on (imported, or the one `import keras` would choose)."""
    return imported() or requested()


def describe() -> dict:
    """What a run records about its backend: its name, versions and devices (JSON-ready)."""
    import keras

    backend = keras.backend.backend()
    info = {"backend": backend, "keras": keras.__version__}
    module = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}[backend]
    info[module] = sys.modules[module].__version__ if module in sys.modules else __import__(module).__version__
    if backend == "jax":
        import jax

        info["devices"] = [str(d) for d in jax.devices()]
        info["processes"] = jax.process_count()
    elif backend == "torch":
        import torch

        info["devices"] = [f"cuda:{i}" for i in range(torch.cuda.device_count())] or ["cpu"]
    else:
        import tensorflow as tf

        info["devices"] = [d.name for d in tf.config.list_logical_devices()]
    return info


def is_tensorflow() -> bool:
    return current() == "tensorflow"


def tensorflow_available() -> bool:
    """Whether TensorFlow can be imported here (found without importing it): for what only it offers on
    any backend (TensorBoard logs, the SavedModel a run publishes)."""
    import importlib.util

    if "tensorflow" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def determinism(seed_given: bool) -> None:
    """Makes this backend's kernels deterministic (`--deterministic`): with the seed, runs are then
    bitwise identical.

    - TensorFlow: `tf.config.experimental.enable_op_determinism()`.
    - JAX: XLA's CPU kernels are deterministic already; on GPU, `--xla_gpu_deterministic_ops`
      (set before JAX starts its backend).
    - PyTorch: `torch.use_deterministic_algorithms(True)` (and cuBLAS' workspace setting on CUDA).
    """
    del seed_given
    backend = current()
    if backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    elif backend == "jax":
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_gpu_deterministic_ops" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_gpu_deterministic_ops=true".strip()
    else:
        import torch

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
