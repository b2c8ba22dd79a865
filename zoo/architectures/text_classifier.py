"""Text classifiers over integer token ids."""

from __future__ import annotations

import keras

from zoo.architectures.blocks import check_input_shape, classifier_head, make_model
from zoo.architectures.registry import register_model
from zoo.architectures.rnn import apply_recurrent_stack, check_recurrent_options

_BILSTM_PAPER = (
    "Graves & Schmidhuber 2005, Framewise phoneme classification with bidirectional LSTM "
    "(Neural Networks 18(5)), https://doi.org/10.1016/j.neunet.2005.06.042"
)


# test_input_shape: 32 tokens. Every route an RNN takes is the same at any length, and the unrolled ones (TFLite's
# full int8, TF.js's) grow with it: 200 steps made its export grid 32 s of the 2-core suite (issue 39).
@register_model(family="rnn", paper=_BILSTM_PAPER, input_shape=(200,), params=2_659_074, num_classes=2,
                input_dtype="int32", test_input_shape=(32,))
def bilstm_text_classifier(
    input_shape,
    num_classes,
    name="bilstm_text_classifier",
    vocab_size: int = 20000,
    embed_dim: int = 128,
    units: int = 64,
    num_layers: int = 1,
    dropout: float = 0.0,
    head_dropout: float = 0.0,
    classifier_activation: str | None = "softmax",
):
    """Embedding -> stacked bidirectional LSTM -> classifier, over int32 token ids.

    Id 0 is padding: the embedding uses `mask_zero=True`, so a right-padded
    sequence gets the same prediction whatever its padded length. Bidirectional
    LSTMs: Graves & Schmidhuber 2005, https://doi.org/10.1016/j.neunet.2005.06.042.

    Args:
        input_shape: `(seq_len,)`; `seq_len` may be None.
        vocab_size: token ids are in `[0, vocab_size)`, 0 being padding.
        embed_dim: embedding width.
        units: LSTM units per direction.
        num_layers: stacked BiLSTM layers.
        dropout: input dropout of each LSTM; `head_dropout` before the classifier.

    Example:
        >>> model = zoo.build("bilstm_text_classifier", vocab_size=10000, input_shape=(None,))
        >>> model(np.array([[5, 17, 9, 0, 0]]))  # 0s are padding
    """
    check_input_shape(input_shape, 1, name, allow_none_axes=(0,))
    check_recurrent_options("lstm", units, num_layers, dropout)
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2 (id 0 is padding). Received: vocab_size={vocab_size}")
    if embed_dim < 1:
        raise ValueError(f"embed_dim must be >= 1. Received: embed_dim={embed_dim}")
    inputs = keras.Input(tuple(input_shape), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(vocab_size, embed_dim, mask_zero=True, name="embedding")(inputs)
    x = apply_recurrent_stack(x, "lstm", units, num_layers, bidirectional=True, dropout=dropout)
    outputs = classifier_head(x, num_classes, activation=classifier_activation, dropout=head_dropout)
    return make_model(inputs, outputs, name)


_FASTTEXT_PAPER = (
    "Joulin, Grave, Bojanowski & Mikolov 2017, Bag of Tricks for Efficient Text Classification (EACL), "
    "https://arxiv.org/abs/1607.01759"
)


@register_model(family="mlp", paper=_FASTTEXT_PAPER, input_shape=(200,), params=1_280_130, num_classes=2,
                input_dtype="int32")
def fasttext_classifier(
    input_shape,
    num_classes,
    name="fasttext_classifier",
    vocab_size: int = 20000,
    embed_dim: int = 64,
    dropout: float = 0.2,
    classifier_activation: str | None = "softmax",
):
    """Embedding -> average over the tokens -> classifier (fastText), over int32 token ids.

    The average of word vectors and a linear classifier: Joulin et al. 2017 report it within a
    point or two of deep models on sentiment and topic benchmarks, trained in seconds. It is zoo's
    default text classifier for `zoo train --data` (fast on CPUs; every export format runs it).
    Id 0 is padding and is left out of the average (`mask_zero=True`).

    Example:
        >>> model = zoo.build("fasttext_classifier", vocab_size=5000, input_shape=(64,), num_classes=4)
    """
    check_input_shape(input_shape, 1, name, allow_none_axes=(0,))
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2 (id 0 is padding). Received: vocab_size={vocab_size}")
    if embed_dim < 1:
        raise ValueError(f"embed_dim must be >= 1. Received: embed_dim={embed_dim}")
    inputs = keras.Input(tuple(input_shape), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(vocab_size, embed_dim, mask_zero=True, name="embedding")(inputs)
    x = keras.layers.GlobalAveragePooling1D(name="avg_pool")(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation, dropout=dropout)
    return make_model(inputs, outputs, name)
