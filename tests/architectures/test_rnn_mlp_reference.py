"""RNN and MLP architectures against independent references (issue: RNN and MLP part of the zoo).

- parameter counts against closed-form formulas and the MLP-Mixer paper's Table 1;
- every architecture overfits one fixed batch (loss falls by >= 50% in 30 steps);
- masked recurrent models give a sequence the same output whatever its padding;
- forecaster output shapes; the character LM's `generate()`.
"""

import keras
import numpy as np
import pytest

import zoo
from zoo.architectures.char_lm import CharLanguageModel


def lstm_params(units, features):
    return 4 * (units * (units + features) + units)


def gru_params(units, features):  # Keras' default reset_after=True has two bias vectors
    return 3 * (units * (units + features) + 2 * units)


def simple_rnn_params(units, features):
    return units * (units + features) + units


# ---------------------------------------------------------------------- parameter counts


@pytest.mark.parametrize(
    "name, layer, formula",
    [
        ("lstm_classifier", "lstm", lstm_params),
        ("gru_classifier", "gru", gru_params),
        ("simple_rnn_classifier", "simple_rnn", simple_rnn_params),
    ],
)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_layer_params_match_the_closed_form(name, layer, formula, bidirectional):
    units, features, classes = 24, 7, 5
    model = zoo.build(
        name, input_shape=(None, features), num_classes=classes, units=units, num_layers=2, bidirectional=bidirectional
    )
    directions = 2 if bidirectional else 1
    prefix = "bi" if bidirectional else ""
    assert model.get_layer(f"{prefix}{layer}1").count_params() == directions * formula(units, features)
    assert model.get_layer(f"{prefix}{layer}2").count_params() == directions * formula(units, directions * units)
    head = directions * units * classes + classes
    expected = directions * (formula(units, features) + formula(units, directions * units)) + head
    assert model.count_params() == expected


def test_text_classifier_params():
    vocab, dim, units, classes = 1000, 16, 12, 3
    model = zoo.build("bilstm_text_classifier", num_classes=classes, vocab_size=vocab, embed_dim=dim, units=units)
    assert model.count_params() == vocab * dim + 2 * lstm_params(units, dim) + 2 * units * classes + classes


def test_forecaster_and_char_lm_params():
    model = zoo.build("lstm_forecaster", input_shape=(None, 3), num_classes=6, units=10, num_layers=2)
    assert model.count_params() == lstm_params(10, 3) + lstm_params(10, 10) + 10 * 6 + 6
    vocab, dim, units = 40, 8, 16
    model = zoo.build("char_lstm_lm", num_classes=vocab, embed_dim=dim, units=units, num_layers=2)
    expected = vocab * dim + lstm_params(units, dim) + lstm_params(units, units) + units * vocab + vocab
    assert model.count_params() == expected


@pytest.mark.parametrize("depth, width, factor", [(2, 128, 2.0), (3, 64, 1.5)])
def test_tabular_resnet_params_match_the_formula(depth, width, factor):
    features, classes = 30, 2
    hidden = int(width * factor)
    model = zoo.build("tabular_resnet", depth=depth, width=width, hidden_factor=factor)
    bn = 4 * width  # gamma, beta, moving mean, moving variance
    block = bn + (width * hidden + hidden) + (hidden * width + width)
    expected = (features * width + width) + depth * block + bn + (width * classes + classes)
    assert model.count_params() == expected


@pytest.mark.parametrize(
    "name, overrides, paper_params",
    # Tolstikhin et al. 2021, Table 1 (224 x 224 input, 1000 classes).
    [
        ("mixer_s16", {}, 18.5e6),
        ("mixer_s32", {}, 19.1e6),
        ("mixer_b16", {}, 59.9e6),
        ("mixer_b16", {"patch_size": 32}, 60.3e6),  # Mixer-B/32
    ],
)
def test_mixer_params_match_the_paper(name, overrides, paper_params):
    # The default configurations' counts as registered (test_registry.py checks them against the build).
    params = zoo.build(name, **overrides).count_params() if overrides else zoo.model_info(name).params
    assert abs(params - paper_params) / paper_params < 0.02, params


# ---------------------------------------------------------------------- overfit one batch


def _rng():
    return np.random.default_rng(0)


def _classification(shape, classes=4, batch=16):
    return _rng().normal(size=(batch, *shape)).astype("float32"), np.arange(batch) % classes


def _tokens(seq_len, vocab, batch=16):
    return _rng().integers(1, vocab, (batch, seq_len)).astype("int32")


_SCE = "sparse_categorical_crossentropy"
_SCE_LOGITS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

OVERFIT_CASES = {
    "lstm_classifier": lambda: (dict(input_shape=(8, 3), num_classes=4, units=32), *_classification((8, 3)), _SCE),
    "gru_classifier": lambda: (
        dict(input_shape=(8, 3), num_classes=4, units=32, num_layers=2),
        *_classification((8, 3)),
        _SCE,
    ),
    "simple_rnn_classifier": lambda: (
        dict(input_shape=(8, 3), num_classes=4, units=32, bidirectional=True),
        *_classification((8, 3)),
        _SCE,
    ),
    "bilstm_text_classifier": lambda: (
        dict(input_shape=(12,), num_classes=2, vocab_size=50, embed_dim=16, units=16),
        _tokens(12, 50),
        np.arange(16) % 2,
        _SCE,
    ),
    "lstm_forecaster": lambda: (
        dict(input_shape=(10, 2), num_classes=3, units=32),
        _rng().normal(size=(16, 10, 2)).astype("float32"),
        _rng().normal(size=(16, 3)).astype("float32"),
        "mse",
    ),
    "lstm_forecaster/seq2seq": lambda: (
        dict(input_shape=(10, 2), num_classes=1, units=32, mode="seq2seq"),
        (x := _rng().normal(size=(16, 10, 2)).astype("float32")),
        np.cumsum(x[..., :1], axis=1) / 3,
        "mse",
    ),
    "char_lstm_lm": lambda: (
        dict(input_shape=(12,), num_classes=20, embed_dim=16, units=64, num_layers=1),
        (ids := _tokens(13, 20)),
        ids,
        _SCE_LOGITS,
    ),
    "mlp": lambda: (dict(input_shape=(20,), num_classes=4, width=64, dropout=0.0), *_classification((20,)), _SCE),
    "tabular_resnet": lambda: (dict(hidden_dropout=0.0), *_classification((30,), classes=2), _SCE),
    "mixer_s16": lambda: (
        dict(input_shape=(32, 32, 3), num_classes=4, hidden_dim=64, tokens_mlp_dim=32, channels_mlp_dim=128, depth=2),
        *_classification((32, 32, 3)),
        _SCE,
    ),
    "mixer_s32": lambda: (
        dict(input_shape=(32, 32, 3), num_classes=4, hidden_dim=64, tokens_mlp_dim=32, channels_mlp_dim=128, depth=2),
        *_classification((32, 32, 3)),
        _SCE,
    ),
}


# Memorising random next tokens needs a higher rate than the default 1e-2.
LEARNING_RATES = {"char_lstm_lm": 3e-2}


@pytest.mark.parametrize("case", sorted(OVERFIT_CASES))
def test_overfits_one_fixed_batch(case):
    keras.utils.set_random_seed(0)
    overrides, x, y, loss = OVERFIT_CASES[case]()
    if case == "char_lstm_lm":  # next-token prediction: inputs ids[:-1], targets ids[1:]
        x, y = x[:, :-1], y[:, 1:]
    model = zoo.build(case.split("/")[0], **overrides)
    model.compile(keras.optimizers.Adam(LEARNING_RATES.get(case, 1e-2)), loss, jit_compile=False)
    seen = []

    def stop_once_halved(epoch, logs):  # at most 30 epochs (one step each) to halve the loss
        seen.append(logs["loss"])
        model.stop_training = logs["loss"] <= 0.5 * seen[0]

    losses = model.fit(x, y, batch_size=len(x), epochs=30, shuffle=False, verbose=0,
                       callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=stop_once_halved)]).history["loss"]
    assert losses[-1] <= 0.5 * losses[0], losses


# ---------------------------------------------------------------------- masking and padding


def _pad(seq, length):
    padded = np.zeros((length, *seq.shape[1:]), seq.dtype)
    padded[: len(seq)] = seq
    return padded


def _padding_variants(seq, longer):
    """The outputs the model must agree on: seq alone unpadded, padded to 10 and 25, and in a batch."""
    batch = np.stack([_pad(seq, 25)] + [_pad(s, 25) for s in longer])
    return [seq[None], _pad(seq, 10)[None], _pad(seq, 25)[None], batch]


@pytest.mark.parametrize(
    "name, overrides",
    [
        ("lstm_classifier", {}),
        ("gru_classifier", {}),
        ("simple_rnn_classifier", {}),
        ("lstm_classifier", {"bidirectional": True}),
        ("gru_classifier", {"bidirectional": True}),
    ],
)
def test_masked_rnn_output_does_not_depend_on_padding(name, overrides):
    keras.utils.set_random_seed(0)
    model = zoo.build(
        name, input_shape=(None, 3), units=16, num_layers=2, masking=True, classifier_activation=None, **overrides
    )
    rng = np.random.default_rng(1)
    seq = rng.uniform(0.1, 1.0, (6, 3)).astype("float32")  # no all-zero step inside the sequence
    longer = [rng.uniform(0.1, 1.0, (n, 3)).astype("float32") for n in (25, 17)]
    outputs = [model(x, training=False).numpy()[0] for x in _padding_variants(seq, longer)]
    for out in outputs[1:]:
        np.testing.assert_allclose(out, outputs[0], atol=1e-5)


def test_text_classifier_mask_zero_makes_padding_irrelevant():
    keras.utils.set_random_seed(0)
    model = zoo.build(
        "bilstm_text_classifier",
        input_shape=(None,),
        vocab_size=100,
        embed_dim=8,
        units=8,
        num_layers=2,
        classifier_activation=None,
    )
    rng = np.random.default_rng(1)
    seq = rng.integers(1, 100, 6).astype("int32")
    longer = [rng.integers(1, 100, n).astype("int32") for n in (25, 17)]
    outputs = [model(x, training=False).numpy()[0] for x in _padding_variants(seq, longer)]
    for out in outputs[1:]:
        np.testing.assert_allclose(out, outputs[0], atol=1e-5)


def test_unrolled_classifier_computes_what_keras_loop_computes():
    """`unroll=True` (the mnist_lstm recipe's) against Keras's own while loop: outputs and gradients of
    the same weights, a bidirectional 2-layer stack."""
    import tensorflow as tf

    options = dict(input_shape=(7, 3), units=8, num_layers=2, bidirectional=True, classifier_activation=None)
    looped = zoo.build("lstm_classifier", **options)
    unrolled = zoo.build("lstm_classifier", unroll=True, **options)
    unrolled.set_weights(looped.get_weights())
    x = np.random.default_rng(0).normal(size=(4, 7, 3)).astype("float32")
    results = []
    for model in (looped, unrolled):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_sum(out**2)
        results.append([out, *tape.gradient(loss, model.trainable_weights)])
    for a, b in zip(*results):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5)
    for bad in ({"input_shape": (None, 3)}, {"masking": True}):
        with pytest.raises(ValueError, match="unroll needs a fixed number of time steps and masking=False"):
            zoo.build("lstm_classifier", **{**options, "unroll": True, **bad})


# ---------------------------------------------------------------------- forecaster


def test_forecaster_output_shapes():
    seq2one = zoo.build("lstm_forecaster", input_shape=(None, 3), num_classes=5, units=8)
    seq2seq = zoo.build("lstm_forecaster", input_shape=(None, 3), num_classes=2, units=8, mode="seq2seq")
    assert tuple(seq2seq.output.shape) == (None, None, 2)
    for steps in (4, 11):
        x = np.random.default_rng(0).normal(size=(3, steps, 3)).astype("float32")
        assert seq2one(x).shape == (3, 5)
        assert seq2seq(x).shape == (3, steps, 2)


@pytest.mark.parametrize(
    "name, bad",
    [
        ("lstm_forecaster", {"mode": "seq2many"}),
        ("lstm_forecaster", {"cell": "transformer"}),
        ("lstm_classifier", {"units": 0}),
        ("bilstm_text_classifier", {"vocab_size": 1}),
        ("tabular_resnet", {"hidden_dropout": 1.5}),
        ("mixer_s32", {"input_shape": (16, 16, 3)}),
        ("char_lstm_lm", {"num_classes": 1}),
    ],
)
def test_bad_options_raise_value_error_naming_the_value(name, bad):
    key, value = next(iter(bad.items()))
    with pytest.raises(ValueError, match=key):
        zoo.build(name, **bad)


# ---------------------------------------------------------------------- character language model


@pytest.fixture(scope="module")
def char_lm():
    keras.utils.set_random_seed(0)
    return zoo.build("char_lstm_lm", num_classes=30, embed_dim=8, units=16, num_layers=2)


def test_generate_returns_the_requested_length(char_lm):
    assert isinstance(char_lm, CharLanguageModel)
    assert char_lm.generate([1, 2, 3], length=7).shape == (7,)
    assert char_lm.generate(np.array([[1, 2], [3, 4], [5, 6]]), length=4, temperature=0).shape == (3, 4)
    assert char_lm.generate([1], length=0).shape == (0,)
    ids = char_lm.generate([1, 2], length=50, temperature=1.5, seed=0)
    assert ids.dtype == np.int32 and ids.min() >= 0 and ids.max() < 30


def test_greedy_generation_is_deterministic_and_matches_the_full_forward_pass(char_lm):
    greedy = char_lm.generate([4, 5, 6], length=6, temperature=0)
    np.testing.assert_array_equal(greedy, char_lm.generate([4, 5, 6], length=6, temperature=0))
    # Reference: re-run the whole functional model on the growing sequence each step.
    seq = [4, 5, 6]
    for _ in range(6):
        logits = char_lm(np.array([seq], "int32"), training=False).numpy()
        seq.append(int(logits[0, -1].argmax()))
    np.testing.assert_array_equal(greedy, seq[3:])


def test_seeded_sampling_is_reproducible(char_lm):
    a = char_lm.generate([1, 2], length=30, temperature=1.0, seed=7)
    np.testing.assert_array_equal(a, char_lm.generate([1, 2], length=30, temperature=1.0, seed=7))
    assert not np.array_equal(a, char_lm.generate([1, 2], length=30, temperature=1.0, seed=8))


def test_generate_rejects_bad_arguments(char_lm):
    with pytest.raises(ValueError, match="temperature"):
        char_lm.generate([1], length=3, temperature=-1)
    with pytest.raises(ValueError, match="seed_ids"):
        char_lm.generate([1, 99], length=3)
    with pytest.raises(ValueError, match="length"):
        char_lm.generate([1], length=-2)


def test_generate_survives_a_keras_round_trip(char_lm, tmp_path):
    path = tmp_path / "char_lm.keras"
    char_lm.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded) is CharLanguageModel
    np.testing.assert_array_equal(
        loaded.generate([3, 1, 4], length=10, temperature=0), char_lm.generate([3, 1, 4], length=10, temperature=0)
    )


def test_tiny_char_lm_learns_to_continue_abc():
    keras.utils.set_random_seed(0)
    vocab = {"a": 1, "b": 2, "c": 3}
    ids = np.array([vocab[ch] for ch in "abc" * 20], "int32")
    windows = np.stack([ids[i : i + 13] for i in range(3)] * 4)  # every phase of the pattern
    model = zoo.build("char_lstm_lm", num_classes=4, embed_dim=8, units=24, num_layers=1)
    model.compile(keras.optimizers.Adam(3e-2), _SCE_LOGITS, jit_compile=False)
    model.fit(windows[:, :-1], windows[:, 1:], batch_size=len(windows), epochs=40, verbose=0)
    inverse = {v: k for k, v in vocab.items()}
    text = "".join(inverse.get(int(i), "?") for i in model.generate([1, 2], length=9, temperature=0))
    assert text == "cabcabcab"
