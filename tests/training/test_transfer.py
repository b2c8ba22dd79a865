"""Transfer learning in training (issue 15): freezing, unfreezing at a lower rate, layer-wise LR decay,
starting from weights with a new head, and `zoo train --save-preset` -> `zoo presets` -> `zoo.build`.

Each feature is checked against an independent reference: weights and BatchNorm statistics that must not
move, Keras' own schedule and optimizer steps, a hand-computed SGD update. The feature tests are
backend-neutral (`tests/test_backends.py` runs them on JAX and PyTorch too); the command-line ones run on
TensorFlow.
"""

import warnings

import keras
import numpy as np
import pytest

import zoo
from tests.backends.autodiff import backend, loss_and_grads, numpy
from zoo.training import TrainConfig
from zoo.training import features as F

tensorflow_session = pytest.mark.skipif(backend() != "tensorflow", reason="command line: the TensorFlow session")

SHAPE = (28, 28, 1)
SMALL = dict(filters=(4, 8), dropout=0.0)


def _data(n=32, seed=0, classes=5):
    rng = np.random.default_rng(seed)
    return rng.random((n, *SHAPE), dtype=np.float32), rng.integers(0, classes, n).astype("int32")


def _model(feats, optimizer=None, seed=0):
    keras.utils.set_random_seed(seed)
    model = zoo.build("convnet_bn", input_shape=SHAPE, num_classes=5, **SMALL)
    model.compile(optimizer or keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy",
                  jit_compile=backend() == "jax", features=list(feats))
    return model


def _values(layer):
    return [np.array(w) for w in layer.get_weights()]


def test_frozen_backbone_keeps_weights_and_batchnorm_statistics_and_trains_the_head():
    model = _model([F.FreezeBackbone()])
    backbone = [model.get_layer(n) for n in ("stage1_conv", "stage1_bn", "stage2_conv", "stage2_bn")]
    before = {layer.name: _values(layer) for layer in backbone}
    head_before = _values(model.get_layer("head_dense"))
    x, y = _data()
    model.fit(x, y, batch_size=8, shuffle=False, epochs=2, verbose=0)
    for layer in backbone:  # BN: moving mean/variance included, so it ran in inference mode
        for a, b in zip(before[layer.name], _values(layer)):
            np.testing.assert_array_equal(a, b)
    assert any(np.abs(a - b).max() > 0 for a, b in zip(head_before, _values(model.get_layer("head_dense"))))
    assert [v.path for v in model.trainable_variables] == ["head_dense/kernel", "head_dense/bias"]


def test_unfreezing_trains_the_backbone_at_the_lowered_schedule():
    schedule = keras.optimizers.schedules.CosineDecay(1e-2, decay_steps=40)
    model = _model([F.FreezeBackbone(unfreeze_at=1, lr_factor=0.1)], keras.optimizers.Adam(schedule))
    conv_before = _values(model.get_layer("stage1_conv"))
    bn_before = _values(model.get_layer("stage1_bn"))
    x, y = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, batch_size=8, shuffle=False, epochs=2, verbose=0, callbacks=model.feature_callbacks())
    assert not [w for w in caught if "traced" in str(w.message)]  # the retrace at unfreezing is expected
    assert any(np.abs(a - b).max() > 0 for a, b in zip(conv_before, _values(model.get_layer("stage1_conv"))))
    for a, b in zip(bn_before, _values(model.get_layer("stage1_bn"))):  # BatchNorm stays frozen
        np.testing.assert_array_equal(a, b)
    step = int(numpy(model.optimizer.iterations))
    assert step == 8
    np.testing.assert_allclose(float(numpy(model.optimizer.learning_rate)), 0.1 * float(numpy(schedule(step))),
                               rtol=1e-6)


def test_layer_decay_scales_each_layers_sgd_step_by_its_multiplier():
    # Plain SGD: the step of layer i must be lr * scale_i * gradient, scale_i = first ** ((L - i) / L).
    first, lr = 0.25, 0.5
    x, y = _data(n=8)
    model = _model([F.LayerwiseLRDecay(first)], keras.optimizers.SGD(lr))
    before = [numpy(v) for v in model.trainable_variables]
    _, grads = loss_and_grads(model, x, y)
    model.train_on_batch(x, y)
    backbone = ["stage1_conv", "stage1_bn", "stage2_conv", "stage2_bn"]
    expected_scale = {name: first ** ((len(backbone) - i) / len(backbone)) for i, name in enumerate(backbone)}
    expected_scale["head_dense"] = 1.0
    for v, w0, g in zip(model.trainable_variables, before, grads):
        scale = expected_scale[v.path.split("/")[0]]
        np.testing.assert_allclose(numpy(v), w0 - lr * scale * g, rtol=1e-5, atol=1e-6)


def test_layer_decay_scales_adam_updates_against_kerass_own_adam():
    x, y = _data(n=8)
    plain = _model([], keras.optimizers.AdamW(1e-2, weight_decay=0.1))
    decayed = _model([F.LayerwiseLRDecay(0.1)], keras.optimizers.AdamW(1e-2, weight_decay=0.1))
    start = [numpy(v) for v in plain.trainable_variables]
    plain.train_on_batch(x, y)
    decayed.train_on_batch(x, y)
    scales = decayed.train_features[0].multipliers(decayed.trainable_variables)
    assert scales[0] == pytest.approx(0.1 ** 1.0) and scales[-1] == 1.0
    for w0, p, d, s in zip(start, plain.trainable_variables, decayed.trainable_variables, scales):
        np.testing.assert_allclose(numpy(d) - w0, s * (numpy(p) - w0), rtol=1e-4, atol=1e-7)


@tensorflow_session
@pytest.mark.parametrize("changes, message", [
    (dict(unfreeze_at=2), "needs freeze"),
    (dict(freeze="backbone", unfreeze_at=3, epochs=3), "must be below epochs"),
    (dict(new_head=True), "give weights too"),
    (dict(freeze="everything"), "Unknown TrainConfig freeze"),
    (dict(layer_lr_decay=1.5), "layer_lr_decay expects"),
    (dict(weights="no_such_preset"), "Unknown preset"),
    (dict(save_preset="Bad Name"), "lowercase"),
])
def test_transfer_settings_are_checked_before_training(changes, message, tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_HOME", str(tmp_path))
    with pytest.raises((ValueError, KeyError), match=message):
        TrainConfig(out=str(tmp_path / "runs"), **changes).validate()


@tensorflow_session
def test_preset_round_trip_through_the_command_line(tmp_path, monkeypatch, capsys, real_mnist_dir):
    """zoo train --save-preset, zoo presets, zoo.build(weights=NAME): the same test accuracy."""
    import zoo.data
    from zoo.cli import main

    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    args = ["--model", "convnet_bn", "--dataset", "mnist", "--data-dir", real_mnist_dir, "--epochs", "1",
            "--train-split", "train[:2048]", "--val-split", "none", "--test-split", "test[:1000]",
            "--export-dir", "none", "--out", str(tmp_path / "runs"), "--verbose", "0", "--seed", "1"]
    assert main(["train", *args, "--save-preset", "convnet_bn_tiny"]) == 0
    out = capsys.readouterr().out
    accuracy = float(out.split("test accuracy:")[1].split()[0])
    assert main(["presets"]) == 0
    listing = capsys.readouterr().out
    assert "convnet_bn_tiny" in listing and f"test_accuracy {accuracy:.4f}" in listing
    assert main(["train", *args, "--save-preset", "convnet_bn_tiny"]) == 2  # taken: refused before training
    assert "already exists" in capsys.readouterr().err

    model = zoo.build("convnet_bn", weights="convnet_bn_tiny")
    model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    test = zoo.data.load("mnist", "test[:1000]", 500, data_dir=real_mnist_dir)
    assert model.evaluate(test, return_dict=True, verbose=0)["accuracy"] == pytest.approx(accuracy, abs=1e-4)

    # Transfer: the preset's 10 classes -> mnist_5to9_50's 5 needs a new head, asked for explicitly.
    transfer = ["--model", "convnet_bn", "--dataset", "mnist_5to9_50", "--data-dir", real_mnist_dir, "--epochs", "2",
                "--batch-size", "32", "--val-split", "none", "--test-split", "test[:500]", "--export-dir", "none",
                "--out", str(tmp_path / "runs"), "--verbose", "0", "--weights", "convnet_bn_tiny"]
    assert main(["train", *transfer]) == 2
    assert "head_dense: kernel has shape" in capsys.readouterr().err
    assert main(["train", *transfer, "--new-head", "--freeze", "backbone", "--unfreeze-at", "1"]) == 0
    assert "skipped head_dense: new head" in capsys.readouterr().out
