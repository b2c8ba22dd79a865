"""Recurrent time-series forecasters."""

from __future__ import annotations

import keras

from zoo.architectures.blocks import check_input_shape, make_model
from zoo.architectures.registry import register_model
from zoo.architectures.rnn import CELL_PAPERS, apply_recurrent_stack, check_recurrent_options

MODES = ("seq2one", "seq2seq")


# test_input_shape: 16 steps, as the text classifier's 32 tokens (zoo/architectures/text_classifier.py).
@register_model(family="rnn", paper=CELL_PAPERS["lstm"], input_shape=(48, 1), params=50_700, num_classes=12,
                task="forecast", test_input_shape=(16, 1))
def lstm_forecaster(
    input_shape,
    num_classes,
    name="lstm_forecaster",
    mode: str = "seq2one",
    cell: str = "lstm",
    units: int = 64,
    num_layers: int = 2,
    dropout: float = 0.0,
    masking: bool = False,
):
    """Stacked LSTM forecaster, sequence-to-one or sequence-to-sequence.

    Input is `(timesteps, features)` (`timesteps` may be None). `num_classes`
    is the number of output units:

    - `mode="seq2one"`: the last state -> `(batch, num_classes)`, e.g. the next
      `num_classes` values of the series (the horizon);
    - `mode="seq2seq"`: every step -> `(batch, timesteps, num_classes)`, e.g. the
      next value(s) after each step.

    The output layer is float32, so forecasts stay float32 under `mixed_float16`.
    LSTM: Hochreiter & Schmidhuber 1997, https://doi.org/10.1162/neco.1997.9.8.1735.

    Example:
        >>> model = zoo.build("lstm_forecaster", input_shape=(None, 3), num_classes=24)
        >>> model.compile("adam", "mse")
    """
    check_input_shape(input_shape, 2, name, allow_none_axes=(0,))
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}. Received: mode={mode!r}")
    check_recurrent_options(cell, units, num_layers, dropout)
    inputs = keras.Input(tuple(input_shape), name="sequence")
    x = keras.layers.Masking(0.0, name="masking")(inputs) if masking else inputs
    x = apply_recurrent_stack(x, cell, units, num_layers, dropout=dropout, return_sequences=mode == "seq2seq")
    outputs = keras.layers.Dense(num_classes, dtype="float32", name="forecast")(x)
    return make_model(inputs, outputs, name)
