"""zoo: a Keras 3 model zoo and deployment toolkit on TensorFlow.

>>> import zoo
>>> zoo.list_models("*conv*")
>>> model = zoo.build("convnet_bn", num_classes=10)

`import zoo` is light: the names below are imported on first use (PEP 562), so `zoo --help` and
`import zoo.core.options` do not load TensorFlow.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> the module that defines it
_LAZY = {
    "ModelInfo": "zoo.architectures",
    "build": "zoo.architectures",
    "list_models": "zoo.architectures",
    "model_info": "zoo.architectures",
    "register_model": "zoo.architectures",
    "UnknownNameError": "zoo.errors",
    "ZooError": "zoo.errors",
    "predict": "zoo.artifacts.predict",  # what `zoo predict` calls
    "val": "zoo.artifacts.val",  # what `zoo val` calls
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
