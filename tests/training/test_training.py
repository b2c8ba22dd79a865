"""The ZooModel training base: learning, tf.distribute correctness, serialization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
import zoo.data
from zoo.training import distribute
from zoo.training import ZooModel

N, BATCH, STEPS = 128, 32, 4


def _data(seed=0, shape=(28, 28, 1)):
    rng = np.random.default_rng(seed)
    return rng.random((N, *shape), dtype=np.float32), rng.integers(0, 10, N).astype("int32")


def _compiled(name, weights=None, optimizer=None, **overrides):
    model = zoo.build(name, **overrides)
    if weights is not None:
        model.set_weights(weights)
    model.compile(
        optimizer=optimizer or keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=False,
    )
    return model


def test_loss_decreases_on_a_fixed_batch():
    keras.utils.set_random_seed(0)
    x, y = _data()
    model = _compiled("mlp", optimizer=keras.optimizers.Adam(3e-3), width=64, dropout=0.0)
    history = model.fit(x, y, batch_size=N, epochs=60, shuffle=False, verbose=0).history["loss"]
    assert history[-1] < 0.2 * history[0]
    assert model.evaluate(x, y, verbose=0, return_dict=True)["accuracy"] > 0.95  # memorizes the batch


def test_train_step_matches_a_hand_computed_sgd_step():
    keras.utils.set_random_seed(0)
    x, y = _data()
    model = _compiled("mlp", width=16, dropout=0.0, depth=1)
    before = [w.numpy() for w in model.trainable_variables]
    with tf.GradientTape() as tape:
        loss = keras.losses.sparse_categorical_crossentropy(y, model(x, training=True)).numpy().mean()
        loss_t = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, model(x, training=True)))
    grads = tape.gradient(loss_t, model.trainable_variables)
    logs = model.train_on_batch(x, y, return_dict=True)
    assert logs["loss"] == pytest.approx(loss, rel=1e-6)
    for w0, g, w1 in zip(before, grads, model.trainable_variables):
        np.testing.assert_allclose(w1.numpy(), w0 - 0.1 * g.numpy(), atol=1e-6)


@pytest.mark.parametrize("name, overrides", [("mlp", dict(width=32, dropout=0.0)), ("lenet5", {})])
def test_two_replica_mirrored_equals_one_device(name, overrides):
    """Reported loss/metrics and the weights after N steps match one device (1e-5)."""
    mirrored = distribute.strategy("mirrored")
    assert mirrored.num_replicas_in_sync == 2  # conftest split the CPU in two
    keras.utils.set_random_seed(0)
    init = zoo.build(name, **overrides).get_weights()
    x, y = _data(1)
    ds = zoo.data.from_arrays(x, y, batch_size=BATCH)

    single = _compiled(name, init, **overrides)
    h1 = single.fit(ds, epochs=2, verbose=0).history
    with mirrored.scope():
        replicated = _compiled(name, init, **overrides)
    h2 = replicated.fit(ds, epochs=2, verbose=0).history

    np.testing.assert_allclose(h2["loss"], h1["loss"], rtol=1e-5)  # not halved
    np.testing.assert_allclose(h2["accuracy"], h1["accuracy"], atol=1e-6)
    for a, b in zip(single.get_weights(), replicated.get_weights()):
        np.testing.assert_allclose(b, a, atol=1e-5)
    e1 = single.evaluate(ds, verbose=0, return_dict=True)
    e2 = replicated.evaluate(ds, verbose=0, return_dict=True)
    assert e2["loss"] == pytest.approx(e1["loss"], rel=1e-5)


@pytest.mark.parametrize("name", ["convnet_bn", "lstm_classifier"])
def test_keras_round_trip_with_safe_mode(tmp_path, name):
    keras.utils.set_random_seed(0)
    shape = zoo.model_info(name).input_shape
    x, y = _data(2, shape)
    model = _compiled(name)
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)  # non-trivial BN statistics and optimizer state
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded) is ZooModel and loaded.name == name
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    # The training base survives the round trip: it keeps training through ZooModel.train_step.
    assert np.isfinite(loaded.fit(x, y, batch_size=BATCH, epochs=1, verbose=0).history["loss"]).all()
