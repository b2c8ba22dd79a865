"""Multi-layer perceptrons."""

from __future__ import annotations

import keras

from zoo.architectures.blocks import classifier_head, make_model
from zoo.architectures.registry import register_model

_NORMS = {None: None, "none": None, "batch": keras.layers.BatchNormalization, "layer": keras.layers.LayerNormalization}


@register_model(
    family="mlp",
    paper="Rumelhart, Hinton & Williams 1986, Learning representations by back-propagating errors (Nature 323)",
    input_shape=(28, 28, 1),
)
def mlp(
    input_shape,
    num_classes,
    name="mlp",
    depth: int = 2,
    width: int = 512,
    dropout: float = 0.2,
    norm: str | None = None,
    activation: str = "relu",
    classifier_activation: str | None = "softmax",
):
    """A plain MLP: flatten, `depth` x (dense -> norm -> activation -> dropout), classifier.

    Example:
        >>> model = zoo.build("mlp", depth=3, width=256, norm="batch")
    """
    if depth < 1 or width < 1:
        raise ValueError(f"depth and width must be >= 1. Received: depth={depth}, width={width}")
    if norm not in _NORMS:
        raise ValueError(f"norm must be one of {sorted(k for k in _NORMS if k)} or None. Received: norm={norm!r}")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1). Received: dropout={dropout}")
    inputs = keras.Input(tuple(input_shape), name="inputs")
    x = keras.layers.Flatten(name="flatten")(inputs) if len(input_shape) > 1 else inputs
    for i in range(depth):
        x = keras.layers.Dense(width, use_bias=_NORMS[norm] is None, name=f"block{i + 1}_dense")(x)
        if _NORMS[norm] is not None:
            x = _NORMS[norm](name=f"block{i + 1}_{norm}norm")(x)
        x = keras.layers.Activation(activation, name=f"block{i + 1}_{activation}")(x)
        if dropout:
            x = keras.layers.Dropout(dropout, name=f"block{i + 1}_dropout")(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation)
    return make_model(inputs, outputs, name)
