"""Keras finds zoo's classes by name after a bare `import zoo`, without `import zoo` importing Keras.

zoo registers its Keras classes (`ZooModel`, its layers, losses, optimizers...) under `zoo>Name` with
`keras.saving.register_keras_serializable(package="zoo")` when their modules are imported; `import zoo`
imports none of them (it stays light), so `keras.saving.load_model("runs/.../last.keras")` used to
fail with "Could not locate class 'ZooModel'". Keras resolves a registered name through its global
custom-object dict (`get_registered_object` in keras/src/saving/object_registration.py). Once Keras is
imported, that dict is replaced by one holding the same entries which, asked for a `zoo>` name it
lacks, imports zoo's registering modules (in `zoo._KERAS_CLASSES`'s order, until the name is there)
and answers again. Nothing is imported until Keras asks: loading a plain Keras model costs nothing.
"""

from __future__ import annotations

import threading
import warnings

PREFIX = "zoo>"  # register_keras_serializable(package="zoo")
_guard = threading.RLock()


class ZooObjects(dict):
    """Keras's global custom objects, which imports zoo's class-registering modules on a `zoo>` miss."""

    def __init__(self, entries, modules):
        super().__init__(entries)
        self.modules = list(modules)  # not yet imported, in lookup order
        self.failed: dict[str, Exception] = {}

    def __contains__(self, name):
        return super().__contains__(name) or self._load(name)

    def __missing__(self, name):
        if self._load(name):
            return super().__getitem__(name)
        raise KeyError(name)

    def get(self, name, default=None):
        return self[name] if name in self else default

    def _load(self, name) -> bool:
        if not isinstance(name, str) or not name.startswith(PREFIX):
            return False
        import importlib

        with _guard:
            while self.modules and not super().__contains__(name):
                module = self.modules.pop(0)
                try:
                    importlib.import_module(module)
                except Exception as e:  # named below if the class is not found elsewhere
                    self.failed[module] = e
            found = super().__contains__(name)
        if not found and self.failed:
            module, error = next(iter(self.failed.items()))
            raise ImportError(f"Keras looked for {name!r}, which zoo may define, but importing "
                              f"{', '.join(self.failed)} failed: {type(error).__name__}: {error}") from error
        return found


def install(modules) -> None:
    """From Keras's import on (or now, if it is imported), Keras's lookups of `zoo>` names import `modules`."""
    from zoo import import_hooks

    import_hooks.after_import("keras", lambda keras: _swap(modules))


def _swap(modules) -> None:
    try:
        from keras.src.saving import object_registration
    except ImportError as e:  # keras moved its registry: zoo's classes load only after their modules
        warnings.warn(f"zoo could not hook Keras's custom-object lookup ({e}); import zoo.architectures, "
                      "zoo.core.model and the other modules defining zoo's classes before loading a .keras file.")
        return
    current = object_registration.GLOBAL_CUSTOM_OBJECTS
    if not isinstance(current, ZooObjects):
        object_registration.GLOBAL_CUSTOM_OBJECTS = ZooObjects(current, modules)
