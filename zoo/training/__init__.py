"""Training: recipes and knobs (`config`), train_step features, callbacks and the `fit` run.

The names below are imported on first use (PEP 562), so reading the knob declarations
(`zoo train --help`) does not load TensorFlow.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "TrainConfig": "zoo.training.config",
    "list_recipes": "zoo.training.config",
    "load_recipe": "zoo.training.config",
    "ZooModel": "zoo.core.model",
    "train": "zoo.training.run",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zoo.training' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
