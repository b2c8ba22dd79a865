"""Optional packages that TensorFlow, Keras and NNCF import at start-up when installed, held back in zoo's processes.

Each of these importers takes a package only if it is installed (`try: import ...` / `except ImportError`),
for a feature that a `zoo` command and zoo's conversion process never call, and pays for the whole package at
every start: scikit-learn, pandas and matplotlib for Keras, JAX for TensorFlow's TFLite package, PyTorch for
NNCF (`benchmarks/results/startup.md` measures what they cost). `hold_back` runs the first import of each
importer with those packages made unimportable (`sys.modules[name] = None`, which the import system turns
into `ModuleNotFoundError`: https://docs.python.org/3/reference/import.html#the-module-cache), so the importer
takes its own fallback. The packages are importable again as soon as that import returns: zoo's own
`import pandas` (tables) or `import jax` (`--backend jax`) is untouched, and so is the Keras backend's own
package, which is never held back.

Only zoo's own processes call `hold_back` (`zoo.cli.main`, the conversion process, the TensorFlow children of
training and export); `import zoo` never does, so a user's program keeps Keras's DataFrame inputs and
scikit-learn wrappers.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable

from zoo import import_hooks

# package -> (the module that imports it only if installed, what that module then lacks in the process)
HELD_BACK = {
    "sklearn": ("keras.src.wrappers", "keras.wrappers' scikit-learn estimators"),
    "pandas": ("keras.src.trainers.data_adapters.array_slicing",
               "pandas DataFrames given straight to Keras's fit and predict (zoo's tables reach Keras as tf.data)"),
    "matplotlib": ("keras.src.visualization", "keras.visualization's plots"),
    "jax": ("tensorflow.lite.python.util", "TFLiteConverter.experimental_from_jax"),
    "torch": ("nncf.tensor.functions", "NNCF's PyTorch tensors (zoo quantizes OpenVINO models)"),
}
# The imports they are held back from: the importers above are all imported by these.
AROUND = ("tensorflow", "keras", "nncf")
_waiting: set[str] = set()  # of AROUND, those whose first import already waits with a hold-back (one is enough)


def hold_back(backend: Callable[[], str] = lambda: os.environ.get("KERAS_BACKEND", "tensorflow")) -> None:
    """Runs the first import of each of `AROUND` with `HELD_BACK`'s packages unimportable.

    `backend()` is asked at that import, once the command has chosen its Keras backend: its package (jax,
    torch) stays importable, since Keras imports it as the backend. Packages already imported are left alone.
    """
    def context():
        try:
            kept = {backend()}
        except Exception:  # a backend Keras will refuse itself: hold back neither backend package
            kept = {"jax", "torch"}
        return _unimportable(set(HELD_BACK) - kept)

    for name in AROUND:  # `zoo.cli.main` may run many times in one process (tests, scripts): hooked once
        if name not in _waiting and import_hooks.around_import(name, context):
            _waiting.add(name)


@contextlib.contextmanager
def _unimportable(names):
    held = [n for n in names if n not in sys.modules]
    for name in held:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in held:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
