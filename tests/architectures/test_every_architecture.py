"""What every registered architecture must do (issue: the zoo).

Runs over `zoo.list_models()`, so a new architecture is covered the moment it
is registered. Large default inputs are shrunk to keep the suite fast.
"""

import re

import keras
import numpy as np
import pytest

import zoo
import zoo.data
from tests.conftest import params_marking_variants_slow
from zoo.architectures import registry
from zoo.training import ZooModel


def is_auto_named(layer) -> bool:
    """Keras' automatic names: the class name in snake case, numbered by the session (`conv2d_3`, `re_lu_7`).

    Readable names may end in a digit (keras.applications' `conv_1`, `block1_conv2`) or equal a class's
    snake case (`flatten`, `embedding`), so only the numbered class name counts as automatic.
    """
    auto = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", type(layer).__name__)  # keras.src.utils.naming.to_snake_case
    auto = re.sub("([a-z])([A-Z])", r"\1_\2", auto).lower()
    return re.fullmatch(rf"{re.escape(auto)}_\d+", layer.name) is not None


def small_input_shape(name):
    return registry.get_spec(name).small_input_shape


def sample_input(name, batch=2, seed=0):
    spec = registry.get_spec(name)
    shape = tuple(d or 7 for d in small_input_shape(name))
    rng = np.random.default_rng(seed)
    if spec.input_dtype.startswith("int"):
        return rng.integers(1, spec.num_classes, (batch, *shape)).astype(spec.input_dtype)
    return rng.random((batch, *shape), dtype=np.float32)


def build_small(name, **kwargs):
    return zoo.build(name, input_shape=small_input_shape(name), **kwargs)


@pytest.mark.parametrize("name", params_marking_variants_slow(zoo.list_models()))
def test_builds_in_a_strategy_scope_in_mixed_float16_with_named_layers_and_round_trips(name, tmp_path):
    """One build per architecture for three checks (each build of the deep families costs seconds: suite time,
    issue 39): built in a strategy's scope under mixed_float16, every layer has a readable name, the outputs stay
    float32, and a `.keras` round trip (safe mode) computes the identical function, its layers' policies with it."""
    from zoo.training import distribute

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        with distribute.strategy("mirrored").scope():
            model = build_small(name)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert isinstance(model, ZooModel)
    auto_named = [layer.name for layer in model.layers if is_auto_named(layer)]
    assert not auto_named, f"layers without a readable name: {auto_named}"

    x = sample_input(name)
    out = np.asarray(model(x, training=False))  # eager: no predict function to trace
    assert out.dtype == np.float32 and np.isfinite(out).all()
    assert any(layer.dtype_policy.name == "mixed_float16" for layer in model.layers)
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)  # under the float32 global policy
    assert type(loaded) is type(model)
    def policies(m):  # an InputLayer takes the global policy when it is rebuilt: it computes nothing
        return [layer.dtype_policy.name for layer in m.layers if not isinstance(layer, keras.layers.InputLayer)]

    assert policies(loaded) == policies(model)
    np.testing.assert_array_equal(np.asarray(loaded(x, training=False)), out)


def _overfit_elsewhere() -> set:
    """The architectures whose overfit tests train them through the same base, traced, by default
    (tests/architectures/test_cnn_reference.py, test_rnn_mlp_reference.py)."""
    from tests.architectures import test_cnn_reference, test_rnn_mlp_reference

    return (set(test_cnn_reference.OVERFIT) - test_cnn_reference.OVERFIT_SLOW) | {
        case.split("/")[0] for case in test_rnn_mlp_reference.OVERFIT_CASES}


# By default for the architectures no overfit test trains (the deep ImageNet families, MobileNetV3, fastText), and
# for convnet_bn, the tf.data representative of those that one does; `-m slow` for every one (suite time, issue 39:
# the others took 43 s of the 2-core suite here).
@pytest.mark.parametrize("name", [
    p if p.values[0] == "convnet_bn" or p.values[0] not in _overfit_elsewhere()
    else pytest.param(*p.values, marks=(*p.marks, pytest.mark.slow), id=p.id)
    for p in params_marking_variants_slow(zoo.list_models())])
def test_trains_through_the_training_base_on_tf_data(name):
    keras.utils.set_random_seed(0)
    model = build_small(name)
    x = sample_input(name, batch=4)
    one = np.asarray(model(x[:1], training=False))  # the output's shape, without tracing a predict function
    spec = registry.get_spec(name)
    if spec.task == "classification":
        y = np.arange(4) % one.shape[-1]
        loss = "sparse_categorical_crossentropy"
    else:
        y = np.zeros((4, *one.shape[1:]), one.dtype)
        loss = "mse"
    initial = model.get_weights()
    # Eager: the same train_step, without tracing a graph of each family's step (half the time for the
    # deep ones); the traced step is the feature tests' and the overfit tests', each family's traced
    # forward the export tests'. One step of plain SGD (one shows the weights move; suite time, issue 39): an
    # eager Adam update is a dozen ops per variable, and the optimizers have tests of their own. Recurrent models are traced: eagerly, an RNN's loop over
    # time runs as a Python loop of ops (the 200-step bidirectional LSTM's two steps took 2.4 times as long).
    recurrent = any(isinstance(layer, keras.layers.RNN) for layer in model._flatten_layers())
    model.compile(keras.optimizers.SGD(1e-2), loss, jit_compile=False, run_eagerly=not recurrent)
    history = model.fit(zoo.data.from_arrays(x, y, batch_size=4), epochs=1, verbose=0).history["loss"]
    assert np.isfinite(history).all()
    assert any(np.abs(a - b).max() > 0 for a, b in zip(model.get_weights(), initial))  # the step moved it
