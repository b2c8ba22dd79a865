"""zoo's DepthwiseConv2D trains as keras.layers.DepthwiseConv2D does, gram gradients or not."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.architectures.layer_gradients import outputs_and_gradients
from zoo.architectures.depthwise import DepthwiseConv2D
from zoo.architectures.stock import stock_keras_model


# (image, kernel, stride, padding, dilation, depth multiplier): the gram path for images with fewer
# pixels than the kernel has taps (never so with "valid" padding); the last two are larger and keep TensorFlow's gradient. Dilation is
# the case where TensorFlow's own DepthwiseConv2dNativeBackpropInput is wrong on CPU.
@pytest.mark.parametrize("image, kernel, stride, padding, dilation, multiplier, gram", [
    ((1, 1), 3, 1, "same", 1, 1, True),
    ((2, 2), 3, 1, "same", 1, 2, True),
    ((2, 3), 3, 2, "same", 1, 1, True),
    ((2, 2), 3, 1, "same", 2, 1, True),
    ((4, 4), 5, 1, "same", 1, 1, True),
    ((3, 4), 5, 2, "same", 1, 3, True),
    ((3, 3), 3, 1, "same", 1, 1, False),
    ((6, 6), 3, 2, "valid", 1, 1, False),
])
def test_matches_keras_depthwise_in_training(image, kernel, stride, padding, dilation, multiplier, gram):
    x = tf.constant(np.random.default_rng(0).normal(size=(5, *image, 4)).astype("float32"))
    kwargs = dict(kernel_size=kernel, strides=stride, padding=padding, dilation_rate=dilation,
                  depth_multiplier=multiplier, activation="tanh")
    ours, stock = DepthwiseConv2D(**kwargs), keras.layers.DepthwiseConv2D(**kwargs)
    ours.build(x.shape)
    ours.bias.assign(np.random.default_rng(1).normal(size=ours.bias.shape).astype("float32"))
    stock.build(x.shape)
    stock.set_weights(ours.get_weights())
    assert ours.takes_gram_gradient(x, training=True) is gram
    assert not ours.takes_gram_gradient(x, training=False)
    for got, want in zip(outputs_and_gradients(ours, x, True), outputs_and_gradients(stock, x, False)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_mixed_bfloat16_as_close_to_float32_as_keras():
    """In mixed bfloat16 the gram gradient (summed in float32) is within bfloat16's error of the float32
    result, as the stock layer's bfloat16 gradient is."""
    x = tf.constant(np.random.default_rng(0).normal(size=(16, 2, 2, 8)).astype("float32"))
    runs = {}
    for cls, dtype in ((keras.layers.DepthwiseConv2D, "float32"), (keras.layers.DepthwiseConv2D, "mixed_bfloat16"),
                       (DepthwiseConv2D, "mixed_bfloat16")):
        keras.utils.set_random_seed(0)
        layer = cls(3, padding="same", activation="tanh", dtype=dtype)
        layer.build(x.shape)
        got = outputs_and_gradients(layer, tf.cast(x, layer.compute_dtype), training=cls is DepthwiseConv2D)
        assert got[2].dtype == tf.float32  # the kernel gradient is the variable's dtype
        runs[cls, dtype] = [np.asarray(tf.cast(g, tf.float32)) for g in got]
    reference = runs[keras.layers.DepthwiseConv2D, "float32"]
    for stock, ours, want in zip(runs[keras.layers.DepthwiseConv2D, "mixed_bfloat16"],
                                 runs[DepthwiseConv2D, "mixed_bfloat16"], reference):
        scale = np.abs(want).max()
        stock_error, our_error = np.abs(stock - want).max() / scale, np.abs(ours - want).max() / scale
        assert our_error <= max(1.5 * stock_error, 1e-2), (our_error, stock_error)


def test_saves_loads_and_turns_stock(tmp_path):
    inputs = keras.Input((2, 2, 3))
    model = keras.Model(inputs, DepthwiseConv2D(3, padding="same", name="dw")(inputs))
    path = tmp_path / "m.keras"
    model.save(path)
    assert isinstance(keras.saving.load_model(path, safe_mode=True).get_layer("dw"), DepthwiseConv2D)
    assert type(stock_keras_model(model).get_layer("dw")) is keras.layers.DepthwiseConv2D
