"""Architectures, one module per family; importing this registers them all."""

from zoo.architectures import cnn, mlp, rnn  # noqa: F401  (registration side effect)
from zoo.architectures.registry import ModelInfo, build, get_spec, list_models, model_info, register_model

__all__ = ["ModelInfo", "build", "get_spec", "list_models", "model_info", "register_model"]
