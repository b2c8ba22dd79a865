"""The CNNs against their references: the papers' parameter counts, keras.applications'
counts and outputs (weights copied over), a fixed-batch overfit, and TCN causality.

The generic checks (strategy scope, mixed precision, `.keras` round trip,
tf.data training, named layers) run for these models in test_architectures.py.
"""

import keras
import numpy as np
import tensorflow as tf
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
    assert model.count_params() == zoo.model_info(name).params  # as registered (slow variants elsewhere)


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


# With `-m slow`: tests/architectures/test_keras_twins.py loads keras.applications' own resnet50 weights file into the
# zoo model by default and compares the outputs, which checks this and the file's layout (suite time, issue 39).
@pytest.mark.slow
def test_resnet50_computes_what_keras_applications_computes():
    shape = (64, 64, 3)
    reference = keras.applications.ResNet50(weights=None, input_shape=shape, classes=10, classifier_activation=None)
    model = zoo.build("resnet50", input_shape=shape, num_classes=10, classifier_activation=None)
    assert_same_function(reference, model, shape)


# With `-m slow`: tests/architectures/test_keras_twins.py loads keras.applications' own mobilenet_v2 weights file into the
# zoo model by default and compares the outputs, which checks this and the file's layout (suite time, issue 39).
@pytest.mark.slow
def test_mobilenet_v2_computes_what_keras_applications_computes():
    shape = (96, 96, 3)
    reference = keras.applications.MobileNetV2(
        weights=None, alpha=0.35, input_shape=shape, classes=10, classifier_activation=None
    )
    model = zoo.build("mobilenet_v2", alpha=0.35, input_shape=shape, num_classes=10, classifier_activation=None)
    assert_same_function(reference, model, shape)


def training_step(model, x, y):
    """Loss and gradients of one training-mode forward pass, and the moving statistics it updated."""
    with tf.GradientTape() as tape:
        loss = keras.losses.sparse_categorical_crossentropy(y, model(x, training=True))
        loss = tf.reduce_mean(loss)
    grads = tape.gradient(loss, model.trainable_weights)
    return float(loss), [np.asarray(g) for g in grads], [np.asarray(w) for w in model.non_trainable_weights]


def assert_trains_like(model, reference, exact_reference, input_shape):
    """zoo's training step (fused BatchNormalization) against stock Keras in float32 and float64.

    Loss and moving statistics must agree to float32 rounding. Gradients are compared as a whole
    with the float64 step: a pre-activation within rounding of a ReLU's kink takes the other
    branch in any float32 computation, so single gradient entries can differ by their full size
    (stock Keras fp32 too: up to ~1% of the gradient norm on these nets), while a wrong epsilon,
    momentum or statistic shows in the loss and moving statistics at once. The layer itself is
    compared entry by entry in tests/test_batch_norm.py.
    """
    randomize_statistics(reference)
    weights = reference.get_weights()
    model.set_weights(weights)
    exact_reference.set_weights([w.astype("float64") for w in weights])
    x = np.random.default_rng(1).random((16, *input_shape), dtype=np.float32)
    y = np.arange(16) % 10
    keras_loss, _, keras_stats = training_step(reference, x, y)
    _, exact_grads, _ = training_step(exact_reference, x.astype("float64"), y)
    loss, grads, stats = training_step(model, x, y)
    np.testing.assert_allclose(loss, keras_loss, rtol=1e-5)
    for e, g in zip(keras_stats, stats):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    flat = np.concatenate([g.ravel() for g in grads])
    exact = np.concatenate([g.ravel() for g in exact_grads])
    assert np.linalg.norm(flat - exact) <= 3e-2 * np.linalg.norm(exact)


def float64_twin(model):
    """`model`'s graph in stock Keras layers computing in float64 (the fused kernel has no float64)."""
    from zoo.architectures.stock import STOCK_EQUIVALENTS

    def clone(layer):
        cls = STOCK_EQUIVALENTS.get(type(layer), type(layer))
        return cls.from_config({**layer.get_config(), "dtype": "float64"})

    inputs = keras.Input(model.inputs[0].shape[1:], dtype="float64")
    twin = keras.models.clone_model(model, input_tensors=inputs, clone_function=clone)
    return keras.Model(twin.inputs, twin.outputs)


def test_mobilenet_v2_trains_like_keras_applications():
    # Training mode exercises zoo's fused BatchNormalization after every conv (keras.applications: Keras').
    shape = (32, 32, 3)
    keras.utils.set_random_seed(0)
    reference = keras.applications.MobileNetV2(weights=None, alpha=0.35, input_shape=shape, classes=10)
    model = zoo.build("mobilenet_v2", alpha=0.35, input_shape=shape, num_classes=10)
    assert_trains_like(model, reference, float64_twin(reference), shape)


def test_resnet20_trains_like_its_stock_keras_twin():
    from zoo.architectures.stock import stock_keras_model

    keras.utils.set_random_seed(0)
    model = zoo.build("resnet20", zero_init_last=False)
    reference = stock_keras_model(model)
    assert type(reference.get_layer("stem_bn")) is keras.layers.BatchNormalization
    assert_trains_like(model, reference, float64_twin(model), (32, 32, 3))


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


# ResNet-50's bottleneck blocks and MobileNetV2's inverted residuals are checked against keras.applications
# (tests/architectures/test_keras_twins.py, test_mobilenet_v2_trains_like_keras_applications); overfitting
# them too costs a minute of tracing each on 2 cores. ResNet-20's training step is checked against its stock
# Keras twin's (test_resnet20_trains_like_its_stock_keras_twin; 10 s here, suite time, issue 39). Each still
# takes a step through the training base by default (tests/architectures/test_every_architecture.py).
OVERFIT_SLOW = {"resnet50", "mobilenet_v2", "resnet20"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in OVERFIT_SLOW else n
                                  for n in sorted(OVERFIT)])
def test_overfits_one_fixed_batch(name):
    keras.utils.set_random_seed(0)
    model = zoo.build(name, input_shape=OVERFIT[name], num_classes=10)
    x = np.random.default_rng(0).random((8, *OVERFIT[name]), dtype=np.float32)
    y = np.arange(8) % 10
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=False)
    losses = [float(model.train_on_batch(x, y))]
    while len(losses) < 30 and losses[-1] > 0.5 * losses[0]:  # at most 30 steps to halve the loss
        losses.append(float(model.train_on_batch(x, y)))
    assert np.isfinite(losses).all()
    assert losses[-1] <= 0.5 * losses[0], f"{name}: loss {losses[0]:.3f} -> {losses[-1]:.3f} in {len(losses)} steps"


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


def test_zero_pad_shortcut_is_numpys_strided_slice_and_pad():
    """Option A's subsampling (a 1x1 max pooling, for speed) takes every s-th pixel, odd sizes included."""
    from zoo.architectures.resnet import ZeroPadShortcut

    rng = np.random.default_rng(0)
    for shape, strides in (((2, 32, 32, 16), 2), ((2, 7, 9, 3), 2), ((1, 5, 4, 2), 3)):
        x = rng.standard_normal(shape).astype("float32")
        expected = np.pad(x[:, ::strides, ::strides, :], [(0, 0), (0, 0), (0, 0), (0, 32 - shape[-1])])
        layer = ZeroPadShortcut(32, strides)
        np.testing.assert_array_equal(np.asarray(layer(x)), expected)
        assert tuple(layer.compute_output_shape(shape)) == expected.shape
