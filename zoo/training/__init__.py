"""Training: the `ZooModel` base, callbacks and the `fit` recipe runner."""

from zoo.training.model import ZooModel

__all__ = ["ZooModel"]
