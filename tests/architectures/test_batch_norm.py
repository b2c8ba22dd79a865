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


# Images, sequences and volumes take the fused kernel; vectors the parent's path.
@pytest.mark.parametrize("shape, fused", [((16, 7, 7, 5), True), ((8, 12, 6), True), ((4, 3, 5, 2, 6), True),
                                          ((8, 6), False)])
def test_matches_keras_batch_norm_in_training(shape, fused):
    x = tf.constant(np.random.default_rng(0).normal(1.0, 3.0, size=shape).astype("float32"))
    expected, _ = train_step(keras.layers.BatchNormalization, x)
    got, layer = train_step(BatchNormalization, x)
    assert layer.fusable(x, training=True) is fused
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


def test_mixed_bfloat16_matches_keras_batch_norm():
    x = tf.constant(np.random.default_rng(0).normal(1.0, 3.0, size=(8, 5, 5, 4)).astype("float32"))
    outputs = []
    for cls in (keras.layers.BatchNormalization, BatchNormalization):
        layer = cls(dtype="mixed_bfloat16")
        y = layer(tf.cast(x, tf.bfloat16), training=True)
        assert y.dtype == tf.bfloat16
        outputs.append([np.asarray(tf.cast(y, tf.float32)), np.asarray(layer.moving_mean),
                        np.asarray(layer.moving_variance)])
    for e, g in zip(*outputs):
        np.testing.assert_allclose(g, e, rtol=2e-2, atol=2e-2)  # bfloat16 has 8 significant bits
