"""Reference baselines a recipe can name (`baseline = "..."`), run in the same script as the recipe.

Each takes the `TrainConfig` and returns `{"name": ..., "metric": ..., "value": ...}`
on the same test split the recipe is measured on.
"""

from __future__ import annotations

from typing import Callable

from zoo.errors import UnknownNameError

_BASELINES: dict[str, Callable] = {}


def register_baseline(name: str):
    def decorator(fn):
        _BASELINES[name] = fn
        return fn

    return decorator


def get(name: str) -> Callable:
    """The baseline called `name`; unknown names get close suggestions."""
    if name not in _BASELINES:
        raise UnknownNameError("baseline", name, _BASELINES)
    return _BASELINES[name]


def run(config) -> dict:
    """Runs the baseline the recipe names."""
    return get(config.baseline)(config)


def names() -> list[str]:
    return sorted(_BASELINES)
