"""Model facts the formats share: layers, lookup vocabularies, recurrent layers, unrolled and looped copies.

Imports Keras only inside the functions, so the format modules that use it stay light to import.
"""

from __future__ import annotations

import copy

RECURRENT = ("LSTM", "GRU", "SimpleRNN")


def layer_classes(model) -> dict[str, str]:
    """Every layer of the model, nested ones too: name -> class name (for errors that name a layer)."""
    layers = {model.name: type(model).__name__}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        layers.setdefault(layer.name, type(layer).__name__)
    return layers


LOOKUPS = ("StringLookup", "IntegerLookup", "TextVectorization")


def input_vocabularies(model, signature) -> dict:
    """input name -> the vocabulary of the lookup layer reading that input directly (functional models).

    Random evaluation inputs for a string or id input are drawn from it, so that verification
    exercises the lookup table instead of its out-of-vocabulary bucket alone.
    """
    from zoo.deploy.formats.trace import is_functional

    if not is_functional(model):
        return {}
    found = {}
    names = set(signature.names)
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if type(layer).__name__ not in LOOKUPS:
            continue
        for node in getattr(layer, "_inbound_nodes", []):
            for tensor in node.input_tensors:
                source = getattr(getattr(tensor, "_keras_history", None), "operation", None)
                if source is not None and source.name in names:
                    vocab = [v for v in layer.get_vocabulary() if v not in ("", "[UNK]", -1, 0)]
                    found.setdefault(source.name, vocab)
    return found


def recurrent_layers(model) -> list[str]:
    """Class names of the recurrent layers anywhere in the model (inside Bidirectional and nested models too)."""
    return [type(layer).__name__ for layer in _recurrent(model)]


def _config_nodes(node):
    """Every dict in a model's config, depth first: the layers' entries, Bidirectional's and nested models'
    inner layers included."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _config_nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _config_nodes(value)


def _rnn_rebuilt(model, unroll: bool, example_shape: tuple | None = None):
    """`model` rebuilt from its config with every RNN layer's `unroll` set (and, given `example_shape`, a
    static input shape), weights copied."""
    config = copy.deepcopy(model.get_config())
    for node in _config_nodes(config):
        if node.get("class_name") in RECURRENT and isinstance(node.get("config"), dict):
            node["config"]["unroll"] = unroll
        if example_shape is not None and node.get("class_name") == "InputLayer":
            node["config"]["batch_shape"] = [None, *example_shape]
            node["config"].pop("shape", None)
    rebuilt = type(model).from_config(config)
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def unrolled_copy(model, example_shape: tuple):
    """The same model with every RNN layer `unroll=True` and a static input shape, weights copied.

    Unrolled RNNs are plain feed-forward graphs (no while loop, no TensorList),
    which TFLite converts to builtins in every precision, full int8 included.
    """
    return _rnn_rebuilt(model, True, example_shape)


def has_unrolled_rnn(model) -> bool:
    """True if some RNN layer of `model` (inside Bidirectional and nested models too) has `unroll=True`.

    Read from the layers, not from `get_config()`: a subclassed model whose `__init__` takes layers has no
    config (keras-team/keras keras/src/export/saved_model_test.py's CustomModel), and exporting it needs none.
    """
    return any(getattr(layer, "unroll", False) for layer in _recurrent(model))


def _recurrent(model):
    """The recurrent layer objects of `model` (inside Bidirectional, its forward layer, and nested models too)."""
    import keras

    found = []

    def walk(layer):
        inner = getattr(layer, "forward_layer", None) or getattr(layer, "layer", None)
        if type(layer).__name__ in RECURRENT:
            found.append(layer)
        elif inner is not None and isinstance(inner, keras.layers.Layer):
            walk(inner)  # Bidirectional's forward layer: its backward one is its mirror
        for sub in getattr(layer, "layers", []) or []:
            walk(sub)

    walk(model)
    return found


def without_config(model) -> str | None:
    """Why `model` has no config (a subclassed model whose `__init__` takes layers and that does not implement
    `get_config`), in one line; None where it has one. The routes that rebuild the model need it."""
    try:
        model.get_config()
    except NotImplementedError:
        return (f"{type(model).__name__} has no get_config() (its __init__ takes arguments Keras cannot "
                "serialize, such as layers)")
    return None


def looped_copy(model):
    """The same model with every RNN layer back on its `tf.while_loop` (`unroll=False`), weights copied.

    Unrolling is a training-speed choice (the mnist_lstm recipe's, `rnn_classifier(unroll=True)`);
    exports start from the loop, the form each format's RNN route is built for. Converted as it is,
    an unrolled LSTM's TF.js graph model held its weights once per time step (8.8 MB against 0.35 MB
    for 28 steps).
    """
    return _rnn_rebuilt(model, False)
