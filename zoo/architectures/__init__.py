"""Architectures: one module per family, each registering its builders on import.

Adding an architecture is one decorated builder function in a module here,
with its facts (parameter count, input shape, paper) in the decorator;
nothing else needs to change.

Importing this package is light: the family modules, and Keras with them, are
imported by the registry's first lookup (`list_models`, `build`, `get_spec`, ...),
and `zoo.architectures.catalog` answers `zoo list` from the recorded facts without them.
"""

from zoo.architectures.registry import ModelInfo, build, get_spec, list_models, model_info, register_model

__all__ = ["ModelInfo", "build", "get_spec", "list_models", "model_info", "register_model"]
