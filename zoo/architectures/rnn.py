"""Recurrent sequence models."""

from __future__ import annotations

import keras

from zoo.architectures.blocks import check_input_shape, classifier_head, make_model
from zoo.architectures.registry import register_model

_CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU, "simple_rnn": keras.layers.SimpleRNN}
_CELL_PAPERS = {
    "lstm": "Hochreiter & Schmidhuber 1997, Long Short-Term Memory (Neural Computation 9(8))",
    "gru": "Cho et al. 2014, Learning Phrase Representations using RNN Encoder-Decoder (EMNLP)",
}


def rnn_classifier(
    cell: str,
    input_shape,
    num_classes,
    name: str,
    units: int = 128,
    num_layers: int = 1,
    bidirectional: bool = False,
    dropout: float = 0.0,
    masking: bool = False,
    classifier_activation: str | None = "softmax",
):
    """Stacked (optionally bidirectional) recurrent layers, last state -> classifier.

    Input is `(timesteps, features)`; `timesteps` may be None for variable
    length. With `masking=True`, all-zero time steps (padding) are skipped.
    """
    check_input_shape(input_shape, 2, name, allow_none_axes=(0,))
    if cell not in _CELLS:
        raise ValueError(f"cell must be one of {sorted(_CELLS)}. Received: cell={cell!r}")
    if units < 1 or num_layers < 1:
        raise ValueError(f"units and num_layers must be >= 1. Received: units={units}, num_layers={num_layers}")
    inputs = keras.Input(tuple(input_shape), name="sequence")
    x = keras.layers.Masking(0.0, name="masking")(inputs) if masking else inputs
    for i in range(num_layers):
        last = i == num_layers - 1
        layer = _CELLS[cell](units, return_sequences=not last, dropout=dropout, name=f"{cell}{i + 1}")
        if bidirectional:
            layer = keras.layers.Bidirectional(layer, name=f"bi{cell}{i + 1}")
        x = layer(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation)
    return make_model(inputs, outputs, name)


@register_model(family="rnn", paper=_CELL_PAPERS["lstm"], input_shape=(28, 28))
def lstm_classifier(input_shape, num_classes, name="lstm_classifier", **kwargs):
    """LSTM sequence classifier (e.g. MNIST read as 28 rows of 28 pixels)."""
    return rnn_classifier("lstm", input_shape, num_classes, name, **kwargs)


@register_model(family="rnn", paper=_CELL_PAPERS["gru"], input_shape=(28, 28))
def gru_classifier(input_shape, num_classes, name="gru_classifier", **kwargs):
    """GRU sequence classifier."""
    return rnn_classifier("gru", input_shape, num_classes, name, **kwargs)
