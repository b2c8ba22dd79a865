"""zoo's fused Adam/AdamW against Adam written out in NumPy (Kingma & Ba 2015, Algorithm 1) and against Keras."""

import numpy as np
import pytest
import tensorflow as tf
import keras

from zoo.core.fused_optimizers import FusedAdam, FusedAdamW

STEPS = 6
LR = keras.optimizers.schedules.ExponentialDecay(1e-2, decay_steps=2, decay_rate=0.5)


def numpy_adam(weights, grads, weight_decay=0.0, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    """Adam with Keras's conventions: epsilon outside the square root, decoupled decay scaled by lr."""
    weights = [w.astype(np.float64).copy() for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, step_grads in enumerate(grads, start=1):
        lr = 1e-2 * 0.5 ** ((t - 1) / 2)
        for i, g in enumerate(step_grads):
            weights[i] -= weights[i] * weight_decay * lr
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            alpha = lr * np.sqrt(1 - beta_2 ** t) / (1 - beta_1 ** t)
            weights[i] -= alpha * m[i] / (np.sqrt(v[i]) + epsilon)
    return weights


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    weights = [rng.normal(size=(16, 8)).astype(np.float32), rng.normal(size=(8,)).astype(np.float32)]
    grads = [[(rng.normal(size=w.shape) * 10.0 ** rng.uniform(-3, 1)).astype(np.float32) for w in weights]
             for _ in range(STEPS)]
    return weights, grads


def _run(optimizer, weights, grads):
    variables = [keras.Variable(w) for w in weights]
    step = tf.function(lambda g: optimizer.apply(g, variables))
    for g in grads:
        step(g)
    ops = {op.type for op in step.get_concrete_function(grads[0]).graph.get_operations()}
    return [v.numpy() for v in variables], ops


@pytest.mark.parametrize("cls, decay", [(FusedAdam, 0.0), (FusedAdamW, 0.1)])
def test_matches_adam_written_out(cls, decay):
    weights, grads = _problem()
    kwargs = {"weight_decay": decay} if decay else {}
    got, ops = _run(cls(LR, **kwargs), weights, grads)
    assert "ResourceApplyAdam" in ops  # the fused kernel ran, not the parent's update
    expected = numpy_adam(weights, grads, weight_decay=decay)
    for g, e, w in zip(got, expected, weights):
        np.testing.assert_allclose(g, e, rtol=0, atol=2e-6)
        assert np.max(np.abs(e - w)) > 1e-2  # the weights moved: the comparison means something


def test_exclusions_from_weight_decay_hold():
    weights, grads = _problem(1)
    optimizer = FusedAdamW(LR, weight_decay=0.5)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    variables = [keras.Variable(weights[0], name="kernel"), keras.Variable(weights[1], name="bias")]
    for g in grads:
        optimizer.apply(g, variables)
    np.testing.assert_allclose(variables[0].numpy(), numpy_adam(weights, grads, 0.5)[0], atol=2e-6)
    np.testing.assert_allclose(variables[1].numpy(), numpy_adam(weights, grads, 0.0)[1], atol=2e-6)


def test_unfused_cases_take_keras_path():
    """AMSGrad and sparse (embedding) gradients: the parent's update, identical to Keras's."""
    weights, grads = _problem(2)
    got, ops = _run(FusedAdamW(LR, weight_decay=0.1, amsgrad=True), weights, grads)
    want, _ = _run(keras.optimizers.AdamW(LR, weight_decay=0.1, amsgrad=True), weights, grads)
    assert "ResourceApplyAdam" not in ops
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)

    def embedding_run(optimizer):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(20, 4),
                                  keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(2)])
        model.compile(optimizer, "sparse_categorical_crossentropy")
        x, y = np.arange(24).reshape(8, 3) % 20, np.arange(8) % 2
        model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
        return model.get_weights()

    for g, w in zip(embedding_run(FusedAdam(1e-2)), embedding_run(keras.optimizers.Adam(1e-2))):
        np.testing.assert_allclose(g, w, atol=1e-6)


def test_under_a_strategy_and_serialized(tmp_path):
    """Under a strategy (Keras all-reduces and updates per replica) the parent's path: Keras's result."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(32, 5)).astype(np.float32), rng.integers(0, 3, 32)

    def fit(cls):
        keras.utils.set_random_seed(0)
        with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
            model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"),
                                      keras.layers.Dense(3)])
            model.compile(cls(1e-2, weight_decay=0.1), "sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
        return model

    model = fit(FusedAdamW)
    for got, want in zip(model.get_weights(), fit(keras.optimizers.AdamW).get_weights()):
        np.testing.assert_allclose(got, want, atol=1e-6)

    model.save(tmp_path / "m.keras")
    restored = keras.models.load_model(tmp_path / "m.keras")
    assert type(restored.optimizer) is FusedAdamW and restored.optimizer.weight_decay == pytest.approx(0.1)
    for got, want in zip(restored.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
