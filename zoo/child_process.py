"""The environment of the Python children zoo starts on the TensorFlow backend, built in one place.

TensorFlow's converters need the TensorFlow backend whatever the parent runs on, so three jobs run in a
fresh interpreter: training publishes a JAX or PyTorch run's SavedModel (`zoo.training.run._publish`),
export writes such a model's SavedModel (`zoo.deploy.export.exporter`), and every conversion runs
crash-isolated (`zoo.deploy.export.isolation`). Each child must import the zoo its parent imported, and
the parent may have found it through `sys.path` alone (a script run from a checkout, a test or notebook
that edits `sys.path`), so the parent's `sys.path` becomes the child's PYTHONPATH.
"""

from __future__ import annotations

import os
import sys

from zoo import native_logs


def tensorflow_env() -> dict[str, str]:
    """This process's environment for a child on the TensorFlow backend that imports what this process imports.

    TensorFlow's C++ log records below errors are held back (`TF_CPP_MIN_LOG_LEVEL=2`) unless the
    environment sets a level: a child's stderr is what a failure quotes.
    """
    return backend_env("tensorflow")


def backend_env(backend: str) -> dict[str, str]:
    """`tensorflow_env` for a child on any Keras backend (export's torch route converts on PyTorch's)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), KERAS_BACKEND=backend)
    env.setdefault(native_logs.VARIABLE, "2")
    return env
