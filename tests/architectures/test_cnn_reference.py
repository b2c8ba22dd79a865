"""The CNNs against their references: the papers' parameter counts, keras.applications'
counts and outputs (weights copied over), a fixed-batch overfit, and TCN causality.

The generic checks (strategy scope, mixed precision, `.keras` round trip,
tf.data training, named layers) run for these models in test_architectures.py.
"""

import keras
import numpy as np
import pytest

import zoo
from zoo.architectures.tcn import WeightNormCausalConv1D, receptive_field


def trainable_params(model):
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


# He et al. 2016, Table 6. The paper counts learned weights (BN moving statistics are not).
CIFAR_RESNET_PARAMS = {
    "resnet20": 0.27e6,
    "resnet32": 0.46e6,
    "resnet44": 0.66e6,
    "resnet56": 0.85e6,
    "resnet110": 1.7e6,
}


@pytest.mark.parametrize("name", sorted(CIFAR_RESNET_PARAMS))
def test_cifar_resnet_matches_table6_params(name):
    model = zoo.build(name)
    assert model.input_shape == (None, 32, 32, 3) and model.output_shape == (None, 10)
    assert trainable_params(model) == pytest.approx(CIFAR_RESNET_PARAMS[name], rel=0.02)


def test_cifar_resnet_projection_shortcuts_add_parameters_and_bad_depth_fails():
    a, b = zoo.build("resnet20"), zoo.build("resnet20", shortcut="B")
    # Two projections: 16x32 and 32x64 1x1 convs, each with a BN.
    assert b.count_params() - a.count_params() == 16 * 32 + 32 * 64 + 4 * (32 + 64)
    from zoo.architectures.resnet import resnet_cifar

    with pytest.raises(ValueError, match="depth=21"):
        resnet_cifar((32, 32, 3), 10, depth=21)


def test_resnet50_params_equal_keras_applications():
    reference = keras.applications.ResNet50(weights=None).count_params()
    assert zoo.build("resnet50").count_params() == reference == 25_636_712


@pytest.mark.parametrize("alpha, expected", [(1.0, 3_538_984), (0.35, 1_691_208)])
def test_mobilenet_v2_params_equal_keras_applications(alpha, expected):
    reference = keras.applications.MobileNetV2(weights=None, alpha=alpha).count_params()
    assert zoo.build("mobilenet_v2", alpha=alpha).count_params() == reference == expected


def randomize_statistics(model, seed=0):
    """Random BN statistics/affines and biases, so a wrong epsilon or a swapped weight shows."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        shape = tuple(w.shape)
        if w.name in ("moving_variance", "gamma"):
            w.assign(rng.uniform(0.5, 1.5, shape).astype("float32"))
        elif w.name in ("moving_mean", "beta", "bias"):
            w.assign(rng.normal(0.0, 0.1, shape).astype("float32"))


def assert_same_function(reference, model, input_shape):
    assert [tuple(w.shape) for w in model.weights] == [tuple(w.shape) for w in reference.weights]
    randomize_statistics(reference)
    model.set_weights(reference.get_weights())
    x = np.random.default_rng(1).random((2, *input_shape), dtype=np.float32)
    expected = reference(x, training=False).numpy()
    np.testing.assert_allclose(model(x, training=False).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_resnet50_computes_what_keras_applications_computes():
    shape = (64, 64, 3)
    reference = keras.applications.ResNet50(weights=None, input_shape=shape, classes=10, classifier_activation=None)
    model = zoo.build("resnet50", input_shape=shape, num_classes=10, classifier_activation=None)
    assert_same_function(reference, model, shape)


def test_mobilenet_v2_computes_what_keras_applications_computes():
    shape = (96, 96, 3)
    reference = keras.applications.MobileNetV2(
        weights=None, alpha=0.35, input_shape=shape, classes=10, classifier_activation=None
    )
    model = zoo.build("mobilenet_v2", alpha=0.35, input_shape=shape, num_classes=10, classifier_activation=None)
    assert_same_function(reference, model, shape)


# One case per builder: resnet32-110 share resnet20's, resnet34 resnet18's.
OVERFIT = {
    "lenet5": (28, 28, 1),
    "convnet_bn": (28, 28, 1),
    "vgg8_bn": (32, 32, 3),
    "resnet20": (32, 32, 3),
    "resnet18": (32, 32, 3),
    "resnet50": (32, 32, 3),
    "mobilenet_v2": (32, 32, 3),
    "tcn": (28, 28),
}


@pytest.mark.parametrize("name", sorted(OVERFIT))
def test_overfits_one_fixed_batch(name):
    keras.utils.set_random_seed(0)
    model = zoo.build(name, input_shape=OVERFIT[name], num_classes=10)
    x = np.random.default_rng(0).random((8, *OVERFIT[name]), dtype=np.float32)
    y = np.arange(8) % 10
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=False)
    losses = [float(model.train_on_batch(x, y)) for _ in range(30)]
    assert np.isfinite(losses).all()
    assert losses[-1] <= 0.5 * losses[0], f"{name}: loss {losses[0]:.3f} -> {losses[-1]:.3f}"


@pytest.mark.parametrize("weight_norm", [True, False])
def test_tcn_is_causal_with_the_stated_receptive_field(weight_norm):
    kernel_size, dilations = 3, (1, 2)
    field = receptive_field(kernel_size, dilations)  # 13 steps
    model = zoo.build(
        "tcn",
        input_shape=(None, 3),
        kernel_size=kernel_size,
        dilations=dilations,
        filters=8,
        weight_norm=weight_norm,
        output="sequence",
        classifier_activation=None,
    )
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 30, 3)).astype("float32")
    base = model.predict(x, verbose=0)
    assert base.shape == (1, 30, 10)

    later = x.copy()
    later[:, 10:] += 1.0  # the future from step 10 on
    out = model.predict(later, verbose=0)
    np.testing.assert_array_equal(out[:, :10], base[:, :10])
    assert np.abs(out[:, 10] - base[:, 10]).max() > 0

    first = x.copy()
    first[:, 0] += 1.0  # seen by steps 0 .. field - 1 only
    out = model.predict(first, verbose=0)
    assert np.abs(out[:, field - 1] - base[:, field - 1]).max() > 0
    np.testing.assert_array_equal(out[:, field:], base[:, field:])


def test_tcn_takes_any_sequence_length():
    model = zoo.build("tcn", input_shape=(None, 28), filters=8)
    assert model.input_shape == (None, None, 28)
    for steps in (5, 28, 61):
        out = model.predict(np.zeros((2, steps, 28), "float32"), verbose=0)
        assert out.shape == (2, 10)


def test_weight_norm_starts_at_the_unnormalized_kernel():
    layer = WeightNormCausalConv1D(4, 3, dilation_rate=2)
    layer.build((None, None, 5))
    norms = np.sqrt((layer.kernel_v.numpy() ** 2).sum(axis=(0, 1)))
    np.testing.assert_allclose(layer.kernel_g.numpy(), norms, rtol=1e-6)


@pytest.mark.parametrize(
    "name, overrides, message",
    [
        ("mobilenet_v2", {"alpha": 0.0}, "alpha=0.0"),
        ("resnet50", {"pooling": "sum"}, "pooling='sum'"),
        ("resnet50", {"input_shape": (16, 16, 3)}, "input_shape=\\(16, 16, 3\\)"),
        ("tcn", {"output": "first"}, "output='first'"),
        ("vgg8_bn", {"stages": ()}, "stages=\\(\\)"),
    ],
)
def test_bad_options_name_the_bad_value(name, overrides, message):
    with pytest.raises(ValueError, match=message):
        zoo.build(name, **overrides)
