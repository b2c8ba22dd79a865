"""Where a model's backbone ends and its head begins: what transfer learning freezes and replaces.

The head is everything after the last global pooling (or flatten) layer:
the classifier Dense of a ResNet, ConvNeXt's LayerNorm and Dense,
MobileNetV3's 1x1 conv and logits, VGG's fully connected layers. These are
exactly the layers keras.applications drops with `include_top=False`. A model
without such a layer (an MLP, an RNN) has its last weighted layer as head.
The classifier is the last layer with weights; `new_head` re-initializes it.
"""

from __future__ import annotations

import keras

_POOLING = (keras.layers.GlobalAveragePooling2D, keras.layers.GlobalMaxPooling2D, keras.layers.GlobalAveragePooling1D,
            keras.layers.GlobalMaxPooling1D, keras.layers.Flatten)


def weighted_layers(model) -> list:
    """The model's layers that own weights, nested models flattened, in model order."""
    out = []
    for layer in model.layers:
        if hasattr(layer, "layers") and layer.layers:
            out.extend(weighted_layers(layer))
        elif layer.weights:
            out.append(layer)
    return out


def classifier_layer(model):
    """The classifier: the model's last layer with weights."""
    layers = weighted_layers(model)
    if not layers:
        raise ValueError(f"Model {model.name!r} has no weights, so no classifier.")
    return layers[-1]


def split_head(model) -> tuple[list, list]:
    """(backbone layers, head layers), both with weights, in model order."""
    layers = list(model.layers)
    cut = max((i for i, layer in enumerate(layers) if isinstance(layer, _POOLING)), default=None)
    if cut is None:
        head = [classifier_layer(model)]
        return [layer for layer in weighted_layers(model) if layer is not head[0]], head
    backbone = [layer for layer in layers[:cut] if layer.weights]
    head = [layer for layer in layers[cut + 1:] if layer.weights]
    if not head:
        raise ValueError(f"Model {model.name!r} has no layer with weights after its pooling: it has no head "
                         "(built with include_top=False?).")
    return backbone, head
