"""Training: the `ZooModel` base, recipes, callbacks and the `fit` run."""

from zoo.training.config import TrainConfig, list_recipes, load_recipe
from zoo.training.model import ZooModel


def train(config):
    """Runs one training run (see `zoo.training.run.train`)."""
    from zoo.training.run import train as _train

    return _train(config)


__all__ = ["TrainConfig", "ZooModel", "list_recipes", "load_recipe", "train"]
