"""zoo's recurrent layers unroll in training only, and compute what Keras's while loop computes."""

import numpy as np
import pytest
import tensorflow as tf
import keras

from zoo.architectures import recurrent
from zoo.architectures.stock import stock_keras_model

KINDS = [(recurrent.LSTM, keras.layers.LSTM), (recurrent.GRU, keras.layers.GRU),
         (recurrent.SimpleRNN, keras.layers.SimpleRNN)]


def _pair(zoo_cls, keras_cls, steps, masking=False):
    """(zoo model, Keras model): a bidirectional layer and a last-state layer, same weights."""
    models = []
    for cls in (zoo_cls, keras_cls):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((steps, 3))
        x = keras.layers.Masking(0.0)(inputs) if masking else inputs
        x = keras.layers.Bidirectional(cls(5, return_sequences=True))(x)
        models.append(keras.Model(inputs, keras.layers.Dense(2)(cls(4)(x))))
    models[1].set_weights(models[0].get_weights())
    return models


LOOPS = {"While", "StatelessWhile"}


def _step(model, x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
    return loss, tape.gradient(loss, model.trainable_weights)


def _op_types(model, x, training, shape=None):
    fn = tf.function(lambda t: model(t, training=training))
    spec = tf.TensorSpec(shape or x.shape, tf.float32)
    return {op.type for op in fn.get_concrete_function(spec).graph.get_operations()}


@pytest.mark.parametrize("zoo_cls, keras_cls", KINDS, ids=lambda c: c.__name__)
def test_training_step_matches_keras_loop(zoo_cls, keras_cls):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 7, 3)).astype(np.float32)
    y = rng.normal(size=(4, 2)).astype(np.float32)
    zoo_model, keras_model = _pair(zoo_cls, keras_cls, 7)
    loss, grads = _step(zoo_model, x, y)
    want_loss, want_grads = _step(keras_model, x, y)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    assert not LOOPS & _op_types(zoo_model, x, True)  # unrolled in training
    assert LOOPS & _op_types(zoo_model, x, False)  # inference (and export) keeps the loop
    assert LOOPS & _op_types(keras_model, x, True)


def test_long_variable_or_masked_sequences_keep_the_loop():
    for steps in (None, recurrent.MAX_TRAINING_UNROLL + 1):
        inputs = keras.Input((steps, 3))
        model = keras.Model(inputs, recurrent.LSTM(4)(inputs))
        assert LOOPS & _op_types(model, None, True, shape=(None, steps, 3))
    zoo_model, keras_model = _pair(recurrent.LSTM, keras.layers.LSTM, 7, masking=True)
    x = np.random.default_rng(1).normal(size=(3, 7, 3)).astype(np.float32)
    x[0, 4:] = 0.0  # padding the mask skips
    assert LOOPS & _op_types(zoo_model, x, True)
    np.testing.assert_array_equal(zoo_model(x, training=True), keras_model(x, training=True))


def test_stock_twin_and_saving(tmp_path):
    zoo_model, _ = _pair(recurrent.LSTM, keras.layers.LSTM, 7)
    plain = stock_keras_model(zoo_model)
    assert {type(layer) for layer in plain.layers} & {keras.layers.LSTM}
    assert not {type(layer) for layer in plain.layers} & set(recurrent.STOCK)
    zoo_model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert type(loaded.layers[-2]) is recurrent.LSTM and loaded.layers[-2].unroll is False
