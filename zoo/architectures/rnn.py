"""Recurrent sequence classifiers, and the recurrent stack the other RNN models share.

The stack (`apply_recurrent_stack`) is used by the text classifier
(`text_classifier.py`), the forecaster (`forecast.py`) and the character language
model (`char_lm.py`) too, so all of them get the same layer names and the
same cell / bidirectional / masking options.
"""

from __future__ import annotations

import keras

from zoo.architectures.blocks import check_input_shape, classifier_head, make_model
from zoo.architectures.registry import register_model

CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU, "simple_rnn": keras.layers.SimpleRNN}
CELL_PAPERS = {
    "lstm": "Hochreiter & Schmidhuber 1997, Long Short-Term Memory (Neural Computation 9(8)), "
    "https://doi.org/10.1162/neco.1997.9.8.1735",
    "gru": "Cho et al. 2014, Learning Phrase Representations using RNN Encoder-Decoder (EMNLP), "
    "https://arxiv.org/abs/1406.1078",
    "simple_rnn": "Elman 1990, Finding Structure in Time (Cognitive Science 14(2)), "
    "https://doi.org/10.1207/s15516709cog1402_1",
}


def check_recurrent_options(cell: str, units: int, num_layers: int, dropout: float = 0.0):
    """Validates the options every recurrent builder shares; raises ValueError naming the bad value."""
    if cell not in CELLS:
        raise ValueError(f"cell must be one of {sorted(CELLS)}. Received: cell={cell!r}")
    if units < 1:
        raise ValueError(f"units must be >= 1. Received: units={units}")
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1. Received: num_layers={num_layers}")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1). Received: dropout={dropout}")


def apply_recurrent_stack(
    x,
    cell: str,
    units: int,
    num_layers: int,
    *,
    bidirectional: bool = False,
    dropout: float = 0.0,
    return_sequences: bool = False,
    unroll: bool = False,
):
    """`num_layers` stacked recurrent layers named `{cell}1`, `{cell}2`, ... (`bi{cell}N` if bidirectional).

    Inner layers always return sequences; the last one returns its final
    state unless `return_sequences`. A Keras mask on `x` (from `Masking` or
    `Embedding(mask_zero=True)`) propagates through the stack, so padded
    steps neither update the state nor count as the "last" step.

    `unroll` is Keras's: the time loop written out step by step (the number
    of steps must be fixed), see `rnn_classifier`.
    """
    for i in range(1, num_layers + 1):
        sequences = return_sequences or i < num_layers
        layer = CELLS[cell](units, return_sequences=sequences, dropout=dropout, unroll=unroll, name=f"{cell}{i}")
        if bidirectional:
            layer = keras.layers.Bidirectional(layer, name=f"bi{cell}{i}")
        x = layer(x)
    return x


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
    unroll: bool = False,
):
    """Stacked (optionally bidirectional) recurrent layers, last state -> classifier.

    Input is `(timesteps, features)`; `timesteps` may be None for variable
    length. With `masking=True`, all-zero time steps (padding) are skipped,
    so a sequence gets the same output whatever padding it is given.

    Args:
        cell: "lstm", "gru" or "simple_rnn".
        units: hidden units per layer (per direction if bidirectional).
        num_layers: stacked recurrent layers.
        bidirectional: wrap each layer in `keras.layers.Bidirectional`.
        dropout: input dropout of each recurrent layer.
        masking: skip all-zero time steps (right-padded variable-length batches).
        classifier_activation: "softmax", or None for logits.
        unroll: write the time loop out step by step (Keras's `unroll`) instead of a
            `tf.while_loop`. It needs a fixed number of time steps and not `masking`.
            Same outputs; for short sequences the step runs without the loop's
            per-iteration bookkeeping, so it trains faster on MNIST rows as the
            mnist_lstm recipe runs (`results/layers/README.md`).
    """
    check_input_shape(input_shape, 2, name, allow_none_axes=(0,))
    check_recurrent_options(cell, units, num_layers, dropout)
    if unroll and (input_shape[0] is None or masking):
        # Keras cannot unroll an unknown number of steps; and its unrolled and looped paths disagree
        # on the masked steps of a go_backwards layer (4e-3 on a masked bidirectional LSTM, measured).
        raise ValueError(f"unroll needs a fixed number of time steps and masking=False. Received: "
                         f"input_shape={tuple(input_shape)}, masking={masking}")
    inputs = keras.Input(tuple(input_shape), name="sequence")
    x = keras.layers.Masking(0.0, name="masking")(inputs) if masking else inputs
    x = apply_recurrent_stack(x, cell, units, num_layers, bidirectional=bidirectional, dropout=dropout, unroll=unroll)
    outputs = classifier_head(x, num_classes, activation=classifier_activation)
    return make_model(inputs, outputs, name)


@register_model(family="rnn", paper=CELL_PAPERS["lstm"], input_shape=(28, 28), params=81_674)
def lstm_classifier(input_shape, num_classes, name="lstm_classifier", **kwargs):
    """LSTM sequence classifier (e.g. MNIST read as 28 rows of 28 pixels).

    Hochreiter & Schmidhuber 1997, https://doi.org/10.1162/neco.1997.9.8.1735.
    Takes every `rnn_classifier` option (`num_layers`, `bidirectional`, `masking`, ...).

    Example:
        >>> model = zoo.build("lstm_classifier", input_shape=(None, 28), num_layers=2, bidirectional=True)
    """
    return rnn_classifier("lstm", input_shape, num_classes, name, **kwargs)


@register_model(family="rnn", paper=CELL_PAPERS["gru"], input_shape=(28, 28), params=61_962)
def gru_classifier(input_shape, num_classes, name="gru_classifier", **kwargs):
    """GRU sequence classifier.

    Cho et al. 2014, https://arxiv.org/abs/1406.1078 (Keras' `reset_after=True` variant).
    Takes every `rnn_classifier` option.

    Example:
        >>> model = zoo.build("gru_classifier", masking=True, input_shape=(None, 28))
    """
    return rnn_classifier("gru", input_shape, num_classes, name, **kwargs)


@register_model(family="rnn", paper=CELL_PAPERS["simple_rnn"], input_shape=(28, 28), params=21_386)
def simple_rnn_classifier(input_shape, num_classes, name="simple_rnn_classifier", **kwargs):
    """Elman (simple) RNN sequence classifier.

    Elman 1990, https://doi.org/10.1207/s15516709cog1402_1. Takes every
    `rnn_classifier` option.

    Example:
        >>> model = zoo.build("simple_rnn_classifier", units=64, bidirectional=True)
    """
    return rnn_classifier("simple_rnn", input_shape, num_classes, name, **kwargs)
