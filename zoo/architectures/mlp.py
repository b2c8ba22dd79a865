"""Multi-layer perceptrons."""

from __future__ import annotations

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.blocks import classifier_head, make_model
from zoo.architectures.registry import register_model

_NORMS = {None: None, "none": None, "batch": BatchNormalization, "layer": keras.layers.LayerNormalization}


@register_model(
    family="mlp",
    paper="Rumelhart, Hinton & Williams 1986, Learning representations by back-propagating errors (Nature 323)",
    input_shape=(28, 28, 1), params=669_706,
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


def tabular_residual_block(
    x, width: int, hidden_width: int, *, hidden_dropout: float, residual_dropout: float, name: str
):
    """x + Dropout(Linear(Dropout(ReLU(Linear(BatchNorm(x)))))), the block of Gorishniy et al. 2021."""
    y = BatchNormalization(name=f"{name}_bn")(x)
    y = keras.layers.Dense(hidden_width, activation="relu", name=f"{name}_dense_hidden")(y)
    if hidden_dropout:
        y = keras.layers.Dropout(hidden_dropout, name=f"{name}_dropout_hidden")(y)
    y = keras.layers.Dense(width, name=f"{name}_dense_out")(y)
    if residual_dropout:
        y = keras.layers.Dropout(residual_dropout, name=f"{name}_dropout_residual")(y)
    return keras.layers.Add(name=f"{name}_add")([x, y])


@register_model(
    family="mlp",
    paper="Gorishniy et al. 2021, Revisiting Deep Learning Models for Tabular Data (NeurIPS), "
    "https://arxiv.org/abs/2106.11959",
    input_shape=(30,), params=137_602,
    num_classes=2,
)
def tabular_resnet(
    input_shape,
    num_classes,
    name="tabular_resnet",
    depth: int = 2,
    width: int = 128,
    hidden_factor: float = 2.0,
    hidden_dropout: float = 0.1,
    residual_dropout: float = 0.0,
    classifier_activation: str | None = "softmax",
):
    """The ResNet baseline for tabular data of Gorishniy et al. 2021, https://arxiv.org/abs/2106.11959.

    Linear -> `depth` x [x + Dropout(Linear(Dropout(ReLU(Linear(BatchNorm(x))))))]
    -> BatchNorm -> ReLU -> Linear. The default input is the 30 features of
    sklearn's breast-cancer data set, 2 classes. Standardize features first.

    Args:
        depth: residual blocks (the paper searches 1-8).
        width: the residual stream width `d` (64-512).
        hidden_factor: the block's hidden width is `int(width * hidden_factor)` (1-4).
        hidden_dropout: dropout after the hidden ReLU; `residual_dropout` before the add.

    Example:
        >>> model = zoo.build("tabular_resnet", input_shape=(n_features,), depth=3, width=256)
    """
    if len(tuple(input_shape)) != 1 or not input_shape[0] or input_shape[0] < 1:
        raise ValueError(f"{name} expects input_shape=(num_features,). Received: input_shape={tuple(input_shape)}")
    hidden_width = int(width * hidden_factor)
    if depth < 1 or width < 1 or hidden_width < 1:
        raise ValueError(
            f"depth, width and int(width * hidden_factor) must be >= 1. "
            f"Received: depth={depth}, width={width}, hidden_factor={hidden_factor}"
        )
    for key, value in (("hidden_dropout", hidden_dropout), ("residual_dropout", residual_dropout)):
        if not 0 <= value < 1:
            raise ValueError(f"{key} must be in [0, 1). Received: {key}={value}")
    inputs = keras.Input(tuple(input_shape), name="features")
    x = keras.layers.Dense(width, name="stem_dense")(inputs)
    for i in range(1, depth + 1):
        x = tabular_residual_block(
            x, width, hidden_width, hidden_dropout=hidden_dropout, residual_dropout=residual_dropout, name=f"block{i}"
        )
    x = BatchNormalization(name="final_bn")(x)
    x = keras.layers.Activation("relu", name="final_relu")(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation)
    return make_model(inputs, outputs, name)
