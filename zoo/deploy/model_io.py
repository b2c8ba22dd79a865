"""Model facts the exporters share: loading with clear errors, inputs, recurrent layers, unrolled copies.

Imports Keras only inside the functions, so the format modules that use it stay light to import.
"""

from __future__ import annotations

import copy
import functools
import os
import zipfile

from zoo.errors import ZooError

RECURRENT = ("LSTM", "GRU", "SimpleRNN")


class ModelFileError(ZooError, ValueError):
    """A model path that is missing or is not a loadable .keras file."""


def load_model_file(path) -> "keras.Model":  # noqa: F821
    """Loads a `.keras` file; a missing or corrupt file is a `ModelFileError` naming the path and the cause."""
    import keras

    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(f"Model file {path!r} does not exist.")
    if not os.path.isfile(path):
        raise ModelFileError(f"Model path {path!r} is not a file (expected a .keras file).")
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"Model file {path!r} is corrupt or not a .keras file: it is not a zip archive.")
    import zoo.architectures  # noqa: F401  registers zoo's Keras classes (ZooModel, layers); `import zoo` is lazy
    import zoo.quantization  # noqa: F401  registers the quantization-aware layers (QAT models)

    try:
        return keras.saving.load_model(path, safe_mode=True)
    except Exception as e:  # Keras raises ValueError, KeyError, OSError, ... for damaged archives
        raise ModelFileError(f"Model file {path!r} could not be loaded: {type(e).__name__}: {e}") from None


@functools.lru_cache(maxsize=2)
def cached_model(path: str) -> "keras.Model":  # noqa: F821
    return load_model_file(path)


def single_input(model):
    """(name, per-example shape, dtype) of the model's one input."""
    if len(model.inputs) != 1:
        raise ZooError(f"Export supports single-input models; {model.name} has {len(model.inputs)} inputs.")
    t = model.inputs[0]
    return t._keras_history.operation.name, tuple(t.shape[1:]), str(t.dtype)


def recurrent_layers(model) -> list[str]:
    """Class names of the recurrent layers anywhere in the model (inside Bidirectional and nested models too)."""
    import keras

    found = []

    def walk(layer):
        inner = getattr(layer, "forward_layer", None) or getattr(layer, "layer", None)
        if type(layer).__name__ in RECURRENT:
            found.append(type(layer).__name__)
        elif inner is not None and isinstance(inner, keras.layers.Layer):
            walk(inner)
        for sub in getattr(layer, "layers", []) or []:
            walk(sub)

    walk(model)
    return found


def unrolled_copy(model, example_shape: tuple):
    """The same model with every RNN layer `unroll=True` and a static input shape, weights copied.

    Unrolled RNNs are plain feed-forward graphs (no while loop, no TensorList),
    which TFLite converts to builtins in every precision, full int8 included.
    """
    config = copy.deepcopy(model.get_config())

    def walk(node):
        if isinstance(node, dict):
            if node.get("class_name") in RECURRENT and isinstance(node.get("config"), dict):
                node["config"]["unroll"] = True
            if node.get("class_name") == "InputLayer":
                node["config"]["batch_shape"] = [None, *example_shape]
                node["config"].pop("shape", None)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    unrolled = type(model).from_config(config)
    unrolled.set_weights(model.get_weights())
    return unrolled
