"""A character-level language model (stacked LSTM) with a `generate()` helper."""

from __future__ import annotations

import keras
import numpy as np

from zoo.architectures.blocks import check_input_shape
from zoo.architectures.registry import register_model
from zoo.architectures.rnn import CELLS, apply_recurrent_stack, check_recurrent_options
from zoo.core.model import ZooModel

_CHAR_LM_PAPER = (
    "Graves 2013, Generating Sequences With Recurrent Neural Networks, https://arxiv.org/abs/1308.0850"
)


@keras.saving.register_keras_serializable(package="zoo")
class CharLanguageModel(ZooModel):
    """A functional next-token model, `(batch, steps)` ids -> `(batch, steps, vocab)` logits.

    Adds `generate()` to `ZooModel`. It has no constructor of its own, so it
    saves to `.keras` and loads back with `safe_mode=True` like any
    functional model (registered as `zoo>CharLanguageModel`).

    Layers are looked up by name: `embedding`, the recurrent layers in
    order, and `logits`.
    """

    def generate(self, seed_ids, length: int, temperature: float = 1.0, seed: int | None = None):
        """Continues `seed_ids` by `length` ids, one step at a time.

        The recurrent states are carried from step to step (the seed is read
        once), so generation costs `len(seed_ids) + length` cell steps.

        Args:
            seed_ids: ids to condition on, `(n,)` or `(batch, n)`, n >= 1.
            length: how many new ids to generate (>= 0).
            temperature: 0 for greedy (argmax) decoding; otherwise logits are
                divided by it before sampling (lower is more conservative).
            seed: seed of the sampler; the same seed gives the same ids.

        Returns:
            The new ids only (not the seed), int32, `(length,)` or `(batch, length)`
            following the shape of `seed_ids`.
        """
        ids = np.asarray(seed_ids)
        if ids.ndim not in (1, 2) or ids.shape[-1] < 1 or ids.size == 0:
            raise ValueError(f"seed_ids must be a non-empty (n,) or (batch, n) array. Received shape: {ids.shape}")
        vocab_size = self.get_layer("logits").units
        if not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0 or ids.max() >= vocab_size:
            raise ValueError(f"seed_ids must be integer ids in [0, {vocab_size}). Received: {ids.tolist()}")
        if int(length) != length or length < 0:
            raise ValueError(f"length must be an integer >= 0. Received: length={length}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 is greedy). Received: temperature={temperature}")
        batch = ids.reshape(-1, ids.shape[-1]).astype("int32")
        rng = np.random.default_rng(seed)

        embedding, head = self.get_layer("embedding"), self.get_layer("logits")
        recurrent = [layer for layer in self.layers if isinstance(layer, tuple(CELLS.values()))]
        states = [layer.cell.get_initial_state(batch_size=batch.shape[0]) for layer in recurrent]

        def step(token_ids):
            x = embedding(token_ids)
            for i, layer in enumerate(recurrent):
                x, states[i] = layer.cell(x, states[i], training=False)
            return keras.ops.convert_to_numpy(head(x)).astype("float64")

        for t in range(batch.shape[1]):
            logits = step(batch[:, t])
        generated = np.zeros((batch.shape[0], int(length)), dtype="int32")
        for t in range(int(length)):
            if temperature == 0:
                next_ids = logits.argmax(axis=-1)
            else:
                scaled = logits / temperature
                probs = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
                probs /= probs.sum(axis=-1, keepdims=True)
                next_ids = np.array([rng.choice(vocab_size, p=p) for p in probs])
            generated[:, t] = next_ids
            if t + 1 < length:
                logits = step(generated[:, t])
        return generated[0] if ids.ndim == 1 else generated


@register_model(
    family="rnn", paper=_CHAR_LM_PAPER, input_shape=(None,), params=874_881, num_classes=65, task="language_model",
    input_dtype="int32",
)
def char_lstm_lm(
    input_shape,
    num_classes,
    name="char_lstm_lm",
    embed_dim: int = 64,
    units: int = 256,
    num_layers: int = 2,
    dropout: float = 0.0,
    cell: str = "lstm",
):
    """Character-level language model: embedding -> stacked LSTM -> next-character logits.

    Graves 2013, https://arxiv.org/abs/1308.0850 (and Karpathy's char-rnn).
    `num_classes` is the vocabulary size (65 characters in Tiny Shakespeare).
    Outputs float32 logits `(batch, steps, vocab)` at every step: train with
    `SparseCategoricalCrossentropy(from_logits=True)` on ids shifted by one.

    Example:
        >>> model = zoo.build("char_lstm_lm", num_classes=vocab_size)
        >>> model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        >>> model.fit(x_ids, next_ids)
        >>> model.generate([vocab["T"], vocab["h"]], length=100, temperature=0.8, seed=0)
    """
    check_input_shape(input_shape, 1, name, allow_none_axes=(0,))
    check_recurrent_options(cell, units, num_layers, dropout)
    if num_classes < 2:
        raise ValueError(f"num_classes (the vocabulary size) must be >= 2. Received: num_classes={num_classes}")
    if embed_dim < 1:
        raise ValueError(f"embed_dim must be >= 1. Received: embed_dim={embed_dim}")
    inputs = keras.Input(tuple(input_shape), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(num_classes, embed_dim, name="embedding")(inputs)
    x = apply_recurrent_stack(x, cell, units, num_layers, dropout=dropout, return_sequences=True)
    outputs = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return CharLanguageModel(inputs=inputs, outputs=outputs, name=name)
