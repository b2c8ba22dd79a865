"""zoo's Conv2D trains as keras.layers.Conv2D does, matmul or not."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.architectures.layer_gradients import outputs_and_gradients
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.stock import stock_keras_model


@pytest.mark.parametrize("kernel, stride, matmul", [(1, 1, True), (1, 2, False), (3, 1, False)])
def test_matches_keras_conv2d_in_training(kernel, stride, matmul):
    x = tf.constant(np.random.default_rng(0).normal(size=(3, 5, 6, 7)).astype("float32"))
    kwargs = dict(filters=4, kernel_size=kernel, strides=stride, padding="same", activation="tanh")
    ours, stock = Conv2D(**kwargs), keras.layers.Conv2D(**kwargs)
    ours.build(x.shape)
    ours.bias.assign(np.random.default_rng(1).normal(size=ours.bias.shape).astype("float32"))
    stock.build(x.shape)
    stock.set_weights(ours.get_weights())
    assert ours.takes_matmul(x, training=True) is matmul
    assert not ours.takes_matmul(x, training=False)
    got = outputs_and_gradients(ours, x, True)
    assert got[0].shape == ((3, 5, 6, 4) if stride == 1 else (3, 3, 3, 4))
    for g, want in zip(got, outputs_and_gradients(stock, x, False)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_mixed_bfloat16_matches_keras_conv2d():
    x = tf.constant(np.random.default_rng(0).normal(size=(4, 3, 3, 8)).astype("float32"))
    results = []
    for cls in (keras.layers.Conv2D, Conv2D):
        keras.utils.set_random_seed(0)
        layer = cls(6, 1, dtype="mixed_bfloat16")
        layer.build(x.shape)
        got = outputs_and_gradients(layer, tf.cast(x, tf.bfloat16), training=cls is Conv2D)
        assert got[0].dtype == tf.bfloat16 and got[2].dtype == tf.float32
        results.append([np.asarray(tf.cast(g, tf.float32)) for g in got])
    for got, want in zip(*results):
        scale = np.abs(want).max()
        np.testing.assert_allclose(got / scale, want / scale, atol=2e-2)  # bfloat16 has 8 significant bits


def test_saves_loads_and_turns_stock(tmp_path):
    inputs = keras.Input((4, 4, 3))
    model = keras.Model(inputs, Conv2D(5, 1, name="pw")(inputs))
    model.save(tmp_path / "m.keras")
    assert isinstance(keras.saving.load_model(tmp_path / "m.keras", safe_mode=True).get_layer("pw"), Conv2D)
    assert type(stock_keras_model(model).get_layer("pw")) is keras.layers.Conv2D
