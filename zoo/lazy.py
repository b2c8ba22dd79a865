"""A package's public names, each imported from its module on first use (PEP 562: module `__getattr__`).

What the packages' `__init__` files share, so that `import zoo.deploy.export` (say) loads neither TensorFlow nor
Keras until one of its names is used. A package declares one table, public name -> defining module:

>>> _EXPORTS = {"export": "zoo.deploy.export.exporter", "plan": "zoo.deploy.export.planner"}
>>> __getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

A public name must not also be the name of one of the package's submodules: importing the submodule
binds its name on the package, and the function would be shadowed by the module.
"""

from __future__ import annotations

import importlib
import sys


def exports(package: str, table: dict[str, str]):
    """`(__getattr__, __dir__)` for `package`, whose names in `table` are imported from their modules on first
    use and then kept on the package."""

    def __getattr__(name):  # noqa: N807
        if name in table:
            value = getattr(importlib.import_module(table[name]), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():  # noqa: N807
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
