"""Imports the tensorflowjs SavedModel converter without its unused heavy dependencies.

`pip install tensorflowjs` would pull in tensorflow-decision-forests and jax,
which downgrade TensorFlow to 2.19 and break protobuf for onnx. zoo installs it
with `--no-deps` (scripts/setup.sh) plus tf-keras and tensorflow-hub, which the
converter really uses. It still imports two modules at load time that the
SavedModel path never calls:
- `tensorflow_decision_forests` (tf_saved_model_conversion_v2.py, for TF-DF ops);
- `tensorflowjs.converters.jax_conversion` (converters/__init__.py, needs jax; a placeholder unless the process
  has already imported jax, which would otherwise be loaded for it alone).
Placeholders for exactly those two are registered here, nowhere else.
A third covers `pkg_resources`, which tensorflow_hub imports for `parse_version`
alone and which setuptools >= 81 no longer ships (installing torch pulls one in).
"""

from __future__ import annotations

import importlib.util
import sys
import types


def _placeholder(name: str, **attrs) -> None:
    if name in sys.modules:
        return
    try:
        if importlib.util.find_spec(name) is not None and name != "tensorflowjs.converters.jax_conversion":
            return  # the real package is installed: use it
    except (ImportError, ValueError):
        pass
    module = types.ModuleType(name)
    module.__doc__ = "zoo placeholder: not installed, not used on the SavedModel conversion path."
    module.__dict__.update(attrs)
    sys.modules[name] = module


def _jax_unavailable(*args, **kwargs):
    raise RuntimeError("JAX conversion is not available: zoo installs tensorflowjs without jax.")


def convert_tf_saved_model():
    """`tensorflowjs.converters.tf_saved_model_conversion_v2.convert_tf_saved_model`."""
    _placeholder("tensorflow_decision_forests")
    from packaging.version import parse as parse_version

    _placeholder("pkg_resources", parse_version=parse_version)
    if "jax" not in sys.modules:  # JAX already loaded (the JAX backend): tensorflowjs imports its own module
        _placeholder("tensorflowjs.converters.jax_conversion", convert_jax=_jax_unavailable)
    from tensorflowjs.converters.tf_saved_model_conversion_v2 import convert_tf_saved_model as fn

    return fn
