"""Keras model configs (the JSON of `.keras`, `.h5` and TF.js layers models), read as data.

Nothing is deserialized. Every object a config names is checked:

- Keras 3 objects carry `module` and `registered_name`
  (`keras/src/saving/serialization_lib.py: serialize_keras_object`): Keras's own
  (`keras.*`, `keras_hub`, ...) are trusted unless the unsafe table names them (Lambda,
  TFSMLayer, the non-modeling functions such as `keras.utils.get_file`); zoo's own classes
  (module `zoo.*` with a source file in this installation) are trusted; anything else is a
  custom object, whose code the loading process would run.
- Legacy configs (Keras 2 `.h5`, TF.js layers models) name classes only: a name that is not
  in Keras's public API is a custom object.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

from zoo.deploy.formats.unsafe import CUSTOM_KERAS_CLASS, KERAS_OBJECTS, Finding

TRUSTED_PACKAGES = ("keras", "keras_hub", "keras_cv", "keras_nlp")
# Values, not classes, in Keras configs (Keras 3: serialization_lib.serialize_keras_object; Keras 2 / tf_keras:
# saving/legacy/saved_model/json_utils.py).
DATA_MARKERS = frozenset({"__bytes__", "__ellipsis__", "__keras_tensor__", "__numpy__", "__slice__", "__tensor__",
                          "__typespec__", "__tuple__", "TensorShape", "TypeSpec", "DType"})
# Class names legacy configs use that are not exported under these names.
_LEGACY_NAMES = {"Functional", "Model", "Sequential", "InputLayer"}


@functools.lru_cache(maxsize=1)
def keras_public_names() -> frozenset[str]:
    """Every name Keras exports (`keras/<module>/__init__.py: from keras.src... import X as X`), read as text:
    importing Keras would import TensorFlow."""
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.submodule_search_locations:
        return frozenset(_LEGACY_NAMES)
    root = Path(list(spec.submodule_search_locations)[0])
    names = set(_LEGACY_NAMES)
    for init in root.glob("*/**/__init__.py"):
        if init.parts[len(root.parts)] in ("src", "_tf_keras"):
            continue
        names.update(re.findall(r"\b\w+ as (\w+)", init.read_text(errors="replace")))  # also inside ( ... )
    return frozenset(names)


def _zoo_module(module: str) -> bool:
    """True if `module` is a module of this zoo installation (checked on disk, without importing)."""
    if module != "zoo" and not module.startswith("zoo."):
        return False
    root = Path(__file__).resolve().parents[3]  # .../zoo
    rel = Path(*module.split(".")[1:])
    return (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file()


def _trusted_module(module: str) -> bool:
    return module == "builtins" or module.split(".", 1)[0] in TRUSTED_PACKAGES or _zoo_module(module)


def _label(obj: dict) -> str:
    inner = obj.get("config")
    name = inner.get("name") if isinstance(inner, dict) else None
    return f"{obj['class_name']} '{name}'" if isinstance(name, str) else str(obj["class_name"])


def _check(obj: dict, legacy: bool):
    """(unsafe table entry, op name, why) for one serialized object, or None."""
    cls, module = obj["class_name"], obj.get("module")
    registered = obj.get("registered_name")
    if cls == "function":
        fn = obj.get("config")
        if not isinstance(fn, str) or module in (None, "builtins"):
            return None  # a Keras built-in function by name ('relu'), or a registered one by name
        full = f"{module}.{fn}"
        if full in KERAS_OBJECTS:
            return KERAS_OBJECTS[full], full, None
        if _trusted_module(module):
            return None
        return CUSTOM_KERAS_CLASS, registered or full, f"custom function {full}: {CUSTOM_KERAS_CLASS.why}"
    if cls in DATA_MARKERS:
        return None
    if cls in KERAS_OBJECTS:
        return KERAS_OBJECTS[cls], cls, None
    if legacy and "module" not in obj:
        if cls not in keras_public_names():
            return CUSTOM_KERAS_CLASS, cls, f"custom class {cls} (not a Keras class): {CUSTOM_KERAS_CLASS.why}"
        return None
    if isinstance(module, str) and not _trusted_module(module):
        return CUSTOM_KERAS_CLASS, registered or f"{module}.{cls}", \
            f"custom class {module}.{cls}: {CUSTOM_KERAS_CLASS.why}"
    if module is None and registered and registered != cls:
        return CUSTOM_KERAS_CLASS, registered, f"custom class {registered}: {CUSTOM_KERAS_CLASS.why}"
    return None


def scan_config(config, root: str = "", legacy: bool = False):
    """(findings, objects scanned) in a model config (a dict or list from JSON).

    `legacy`: the config is Keras 2 style (no `module` fields), as in `.h5` and TF.js files.
    """
    findings, scanned = [], 0
    todo = [(config, root, False)]
    while todo:  # iterative: a hostile config may nest deeper than Python's recursion limit
        node, where, in_lambda = todo.pop()
        if isinstance(node, list):
            todo += [(v, where, in_lambda) for v in reversed(node)]
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("class_name"), str):
            scanned += 1
            hit = _check(node, legacy)
            here = f"{where} > {_label(node)}" if where else _label(node)
            if hit and not (in_lambda and hit[1] == "__lambda__"):  # a Lambda layer's own function: one finding
                entry, op, why = hit
                findings.append(Finding.of(entry, here, op=op, why=why))
            where, in_lambda = here, in_lambda or node["class_name"] == "Lambda"
        todo += [(v, where, in_lambda) for v in reversed(list(node.values())) if isinstance(v, (dict, list))]
    return findings, scanned
