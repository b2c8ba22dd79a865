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
    """True if some RNN layer of `model` (inside Bidirectional and nested models too) has `unroll=True`."""
    return any(node.get("class_name") in RECURRENT and (node.get("config") or {}).get("unroll")
               for node in _config_nodes(model.get_config()))


def looped_copy(model):
    """The same model with every RNN layer back on its `tf.while_loop` (`unroll=False`), weights copied.

    Unrolling is a training-speed choice (the mnist_lstm recipe's, `rnn_classifier(unroll=True)`);
    exports start from the loop, the form each format's RNN route is built for. Converted as it is,
    an unrolled LSTM's TF.js graph model held its weights once per time step (8.8 MB against 0.35 MB
    for 28 steps).
    """
    return _rnn_rebuilt(model, False)
