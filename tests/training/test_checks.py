"""zoo.training.checks: finite-difference gradient check, overfit one batch, retracing guard, NaN/Inf stop."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo.training import checks


def _log_sigmoid(wrong: bool):
    @tf.custom_gradient
    def log_sigmoid(x):
        y = tf.minimum(x, 0.0) - tf.math.log1p(tf.exp(-tf.abs(x)))  # stable for large |x|

        def grad(upstream):
            # d/dx log(sigmoid(x)) = 1 - sigmoid(x) = 1 - exp(y): the backward reuses the forward output.
            return upstream * (tf.exp(y) if wrong else 1.0 - tf.exp(y))

        return y, grad

    return log_sigmoid


class LogSigmoid(keras.layers.Layer):
    def __init__(self, wrong=False, **kwargs):
        super().__init__(**kwargs)
        self.wrong = wrong

    def call(self, x):
        return _log_sigmoid(self.wrong)(x)

    def get_config(self):
        return {**super().get_config(), "wrong": self.wrong}


X = np.random.default_rng(0).normal(scale=3.0, size=(4, 5))


def test_gradient_check_passes_a_correct_custom_gradient():
    report = checks.gradients(LogSigmoid(), X)
    assert report.passed and report.max_relative_error < 1e-6 and report.checked == X.size


def test_gradient_check_catches_a_wrong_custom_gradient():
    report = checks.gradients(LogSigmoid(wrong=True), X)
    assert not report.passed and report.max_relative_error > 0.1
    assert "input[" in report.worst and "MISMATCH" in str(report)


def test_gradient_check_covers_layer_weights_in_float64():
    report = checks.gradients(keras.layers.Dense(3, activation="tanh"), X[:2])
    assert report.passed and report.checked == 2 * 5 + 5 * 3 + 3


def test_overfit_batch_passes_a_working_model_and_fails_a_broken_one():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 32).astype("int32")
    model = zoo.build("mlp", width=32, depth=1, dropout=0.0)
    model.compile("adam", "sparse_categorical_crossentropy")
    before = model.get_weights()
    assert checks.overfit_batch(model, (x, y)).passed
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))  # untouched

    model.trainable = False  # the silent bug: nothing can learn
    model.compile("adam", "sparse_categorical_crossentropy")
    report = checks.overfit_batch(model, (x, y), steps=50)
    assert not report.passed and "FAILED" in str(report)


def test_retracing_guard_warns_and_names_the_changed_input():
    model = zoo.build("mlp", width=8, depth=1, dropout=0.0)
    model.compile("sgd", "sparse_categorical_crossentropy", jit_compile=False)
    y = np.zeros(8, "int32")
    with pytest.warns(RuntimeWarning, match=r"traced 3 times.*input signature changed.*float16"):
        for dtype in ("float32", "float64", "float16"):
            model.train_on_batch(np.zeros((8, 28, 28, 1), dtype), y)


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(tmp_path, real_mnist_dir):
    from zoo.training import TrainConfig, train
    from zoo.training.callbacks import NonFiniteLossError

    config = TrainConfig(model="mlp", epochs=2, batch_size=64, optimizer="sgd", lr=1e12, schedule="constant",
                         train_split="train[:640]", val_split=None, test_split=None, export_dir=None,
                         out=str(tmp_path), data_dir=real_mnist_dir, backup_every=1, verbose=0,
                         model_overrides={"width": 16, "depth": 1, "dropout": 0.0})
    with pytest.raises(NonFiniteLossError, match=r"NaN/Inf at step (\d+).*Last good checkpoint: .*state\.npz") as e:
        train(config)
    assert (tmp_path / "mlp-mnist" / "backup" / "state.npz").is_file()  # kept
    assert "step 1 " not in str(e.value) or "no step was saved" in str(e.value)
