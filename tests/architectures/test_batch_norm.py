"""zoo's fused BatchNormalization computes what keras.layers.BatchNormalization computes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.architectures.batch_norm import BatchNormalization


def train_step(cls, x, **kwargs):
    layer = cls(momentum=0.9, **kwargs)
    layer.build(x.shape)
    rng = np.random.default_rng(1)
    layer.gamma.assign(rng.normal(size=layer.gamma.shape).astype("float32"))
    layer.beta.assign(rng.normal(size=layer.beta.shape).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        loss = tf.reduce_sum(y * tf.range(y.shape[-1], dtype=tf.float32))
    grads = tape.gradient(loss, [x, layer.gamma, layer.beta])
    return [y, layer.moving_mean, layer.moving_variance, *grads], layer


@pytest.mark.parametrize("shape", [(16, 7, 7, 5), (8, 6)])  # fused (images) and the fallback (vectors)
def test_matches_keras_batch_norm_in_training(shape):
    x = tf.constant(np.random.default_rng(0).normal(1.0, 3.0, size=shape).astype("float32"))
    expected, _ = train_step(keras.layers.BatchNormalization, x)
    got, layer = train_step(BatchNormalization, x)
    # The gamma gradient sums ~800 normalised values that nearly cancel: compare it at that scale.
    for e, g in zip(expected, got):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-3)
    # Inference is the parent's own path.
    np.testing.assert_allclose(layer(x, training=False), layer(x, training=False))


def test_saves_and_loads_as_zoo_layer(tmp_path):
    inputs = keras.Input((4, 4, 3))
    model = keras.Model(inputs, BatchNormalization(name="bn")(inputs))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras", safe_mode=True)
    assert isinstance(loaded.get_layer("bn"), BatchNormalization)
