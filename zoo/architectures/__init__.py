"""Architectures. Every module in this package registers its builders on import.

Adding an architecture is one decorated builder function in a module here;
nothing else needs to change.
"""

import importlib
import pkgutil

from zoo.architectures.registry import ModelInfo, build, get_spec, list_models, model_info, register_model

_INFRASTRUCTURE = {"registry", "blocks", "heads", "weights"}  # no builders
for _module in pkgutil.iter_modules(__path__):
    if _module.name not in _INFRASTRUCTURE and not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["ModelInfo", "build", "get_spec", "list_models", "model_info", "register_model"]
