"""Multi-layer perceptrons."""

from __future__ import annotations

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.blocks import classifier_head, make_model
from zoo.architectures.ensemble import EnsembleAdapter, EnsembleDense
from zoo.architectures.numeric_embedding import PeriodicEmbedding
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


EMBEDDINGS = ("periodic", None)


@register_model(
    family="mlp",
    paper="Gorishniy et al. 2022, On Embeddings for Numerical Features in Tabular Deep Learning (NeurIPS), "
    "https://arxiv.org/abs/2203.05556; Gorishniy et al. 2024, TabM, https://arxiv.org/abs/2410.24210",
    input_shape=(30,), params=271_554,
    num_classes=2,
)
def tabular_mlp(
    input_shape,
    num_classes,
    name="tabular_mlp",
    numeric_features: int | None = None,
    embedding: str | None = "periodic",
    frequencies: int = 16,
    embedding_units: int = 16,
    sigma: float = 0.1,
    depth: int = 3,
    width: int = 256,
    dropout: float = 0.1,
    activation: str = "relu",
    members: int = 1,
    classifier_activation: str | None = "softmax",
):
    """An MLP on periodic embeddings of the numeric features, optionally a TabM-mini ensemble.

    PeriodicEmbedding (PLR, Gorishniy et al. 2022, https://arxiv.org/abs/2203.05556) of the first
    `numeric_features` columns (the rest, one-hot codes, pass through) -> `depth` x (Dense -> activation
    -> Dropout) -> the classifier. With `members` > 1 the MLP is TabM-mini (Gorishniy et al. 2024,
    https://arxiv.org/abs/2410.24210): `members` copies of the input, each scaled by its own vector,
    share the MLP and have their own output layers; the output is the mean of their predictions (and
    training minimizes the loss of that mean, not each member's own as in the paper).
    Give it scaled features (``zoo train --data`` builds robust scaling and clipping in front).

    Args:
        numeric_features: leading numeric columns to embed (None: every column).
        embedding: ``"periodic"`` or None (the columns as they are).
        frequencies, embedding_units, sigma: the PLR embedding's (see `PeriodicEmbedding`).
        depth, width, dropout, activation: the MLP's blocks.
        members: ensemble members (TabM-mini); 1 is a single MLP.

    Example:
        >>> model = zoo.build("tabular_mlp", input_shape=(n_features,), num_classes=3, numeric_features=n_numeric)
    """
    if len(tuple(input_shape)) != 1 or not input_shape[0] or input_shape[0] < 1:
        raise ValueError(f"{name} expects input_shape=(num_features,). Received: input_shape={tuple(input_shape)}")
    if embedding not in EMBEDDINGS:
        raise ValueError(f"embedding must be one of {EMBEDDINGS}. Received: embedding={embedding!r}")
    if depth < 1 or width < 1:
        raise ValueError(f"depth and width must be >= 1. Received: depth={depth}, width={width}")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1). Received: dropout={dropout}")
    if numeric_features is not None and not 0 <= numeric_features <= input_shape[0]:
        raise ValueError(f"numeric_features must be in [0, {input_shape[0]}] (the input's columns). "
                         f"Received: numeric_features={numeric_features}")
    inputs = keras.Input(tuple(input_shape), name="features")
    x = inputs
    if embedding == "periodic" and numeric_features != 0:
        x = PeriodicEmbedding(numeric_features, frequencies, embedding_units, sigma, name="periodic_embedding")(x)
    if members > 1:
        x = EnsembleAdapter(members, name="ensemble_adapter")(x)
    for i in range(1, depth + 1):
        x = keras.layers.Dense(width, activation=activation, name=f"block{i}_dense")(x)
        if dropout:
            x = keras.layers.Dropout(dropout, name=f"block{i}_dropout")(x)
    if members == 1:
        return make_model(inputs, classifier_head(x, num_classes, activation=classifier_activation), name)
    x = EnsembleDense(members, num_classes, name="head_members")(x)
    x = keras.layers.Activation(classifier_activation or "linear", dtype="float32", name="head_member_predictions")(x)
    outputs = keras.layers.GlobalAveragePooling1D(dtype="float32", name="predictions")(x)  # the members' mean
    return make_model(inputs, outputs, name)
