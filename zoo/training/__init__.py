"""Training: recipes and knobs (`config`), train_step features, callbacks and the `fit` run, as `plan` (every
setting decided and checked, `planner`) then `execute` (`run`).

The names below are imported on first use (PEP 562), so reading the knob declarations
(`zoo train --help`) does not load TensorFlow.
"""

from __future__ import annotations

from zoo import lazy

_LAZY = {
    "TrainConfig": "zoo.training.config",
    "TrainPlan": "zoo.training.planner",
    "execute": "zoo.training.run",
    "list_recipes": "zoo.training.config",
    "load_recipe": "zoo.training.config",
    "ZooModel": "zoo.core.model",
    "plan": "zoo.training.planner",
    "train": "zoo.training.run",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy.exports(__name__, _LAZY)
