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


def _arrays(ds):
    """Stacks a batched `(x, y)` dataset into two numpy arrays."""
    import numpy as np

    xs, ys = zip(*((x.numpy(), y.numpy()) for x, y in ds))
    return np.concatenate(xs), np.concatenate(ys)


def _split_data(config):
    import zoo.data

    return zoo.data.load_splits(config.dataset, batch_size=256, data_dir=config.data_dir, shuffle=False)


@register_baseline("gradient_boosting")
def gradient_boosting(config) -> dict:
    """scikit-learn's GradientBoostingClassifier on the same train/test split (Friedman 2001)."""
    from sklearn.ensemble import GradientBoostingClassifier

    data = _split_data(config)
    x_train, y_train = _arrays(data.dataset(config.train_split, shuffle=False))
    x_test, y_test = _arrays(data.dataset(config.test_split, shuffle=False))
    model = GradientBoostingClassifier(random_state=config.seed or 0).fit(x_train, y_train)
    return {
        "name": "sklearn GradientBoostingClassifier",
        "metric": "accuracy",
        "value": float(model.score(x_test, y_test)),
        "higher_is_better": True,
        "margin": 0.01,  # the recipe must be within 1 point
    }


@register_baseline("naive_last_value")
def naive_last_value(config) -> dict:
    """Forecast every target as the last observed value (the persistence forecast).

    `value` is in the normalised units the model's MAE is reported in;
    `value_original_units` and `scale` convert both back.
    """
    data = _split_data(config)
    original = data.naive_mae(config.test_split)
    scale = float(data.std[list(data.target_columns)][0])
    return {
        "name": "naive last-value forecast",
        "metric": "mae",
        "value": original / scale,
        "value_original_units": original,
        "scale": scale,
        "higher_is_better": False,
    }


@register_baseline("unigram")
def unigram(config) -> dict:
    """A unigram character model fitted on the training text; `value` is its cross-entropy (nats)."""
    import math

    import zoo.data

    data = _split_data(config)
    perplexity = zoo.data.unigram_perplexity(data, config.test_split)
    return {
        "name": "unigram character model",
        "metric": "loss",
        "value": math.log(perplexity),
        "perplexity": perplexity,
        "higher_is_better": False,
    }
