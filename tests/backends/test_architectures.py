"""Every architecture on JAX and PyTorch: TensorFlow's outputs from its `.keras` file, a fit step, a round trip.

Run by `tests/test_backends.py` in a process per backend, with `ZOO_BACKEND_REFERENCE` naming the
folder of TensorFlow references (`tests/backends/references.py`). On TensorFlow itself these checks
are `tests/architectures/test_every_architecture.py`'s, so this file skips there. The first member of
each family runs by default; its size variants with `-m slow`.
"""

import json
import os

import keras
import numpy as np
import pytest

import zoo
from tests.architectures.test_every_architecture import sample_input
from tests.backends import references
from tests.backends.autodiff import backend, numpy
from tests.conftest import params_marking_variants_slow
from zoo.architectures import registry
from zoo.training import ZooModel

pytestmark = pytest.mark.skipif(backend() == "tensorflow",
                                reason="on TensorFlow: tests/architectures/test_every_architecture.py")
TOLERANCE = 1e-4  # max abs difference, float32, between backends on the same weights


# The reference models the output check loaded, for the fit step to train next: loading a `.keras` file builds
# the model, and on JAX every initializer of a new shape is an XLA compilation of its own (seconds for the deep
# families), which a second load of the same file would pay again in part.
_LOADED: dict = {}


def _reference(name, keep=False):
    """(model, x, TensorFlow's output) for `name`; kept for the next call where `keep`, else taken from the kept."""
    if name in _LOADED:
        return _LOADED.pop(name)
    directory = os.environ.get("ZOO_BACKEND_REFERENCE")
    if not directory:
        pytest.skip("no TensorFlow references: run through tests/test_backends.py")
    found = references.read(directory, name)
    if found is None:
        pytest.fail(f"no TensorFlow reference for {name!r} in {directory}")
    if keep:
        _LOADED[name] = found
    return found


def _outputs(model, x):
    """Inference as users run it: `predict`, one XLA compilation of the forward graph on JAX, where a first
    eager call compiles each of its ops on its own (several times slower for the deep families)."""
    return numpy(model.predict(x, batch_size=len(x), verbose=0))


def _layers(model) -> list:
    """Each layer's class and config, as a `.keras` file's JSON holds them (tuples as lists)."""
    return json.loads(json.dumps([(type(layer).__name__, layer.get_config())
                                  for layer in model._flatten_layers(include_self=False)], default=str))


def _forward(model):
    """model -> its outputs on x, for every model of the same layers as `model`, which the caller checks: on JAX
    `model`'s own `predict`, compiled by the output check, run with the other model's weights (`predict` compiles
    the forward graph again for each model object: seconds per deep family), elsewhere `_outputs`. It leaves
    `model` holding the weights of the last model run."""
    if backend() != "jax":
        return _outputs

    def run(m, x):
        model.set_weights(m.get_weights())
        return _outputs(model, x)
    return run


def _params(slow=references.COVERED_ELSEWHERE):
    """Every architecture and the shallow members (`references.SHALLOW`); size variants and the families in `slow`
    (`references`) marked slow."""
    return [*(pytest.param(*p.values, marks=(*p.marks, *([pytest.mark.slow] if p.values[0] in slow else [])))
              for p in params_marking_variants_slow(zoo.list_models())), *references.SHALLOW]


def _forward_params():
    """`_params()`, those that `references.default_backend` gives to another backend marked slow here."""
    params = [p if hasattr(p, "values") else pytest.param(p) for p in _params()]
    return [p if references.default_backend(p.values[0]) == backend()
            else pytest.param(*p.values, marks=(*p.marks, pytest.mark.slow), id=p.id) for p in params]


@pytest.mark.parametrize("name", _forward_params())
def test_matches_tensorflow_and_round_trips(name, tmp_path):
    model, x, expected = _reference(name, keep=True)
    assert isinstance(model, ZooModel)
    # The same weights give TensorFlow's outputs (`predict`, as users run it).
    got = _outputs(model, x)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= TOLERANCE, f"{name}: {np.abs(got - expected).max():.2e} from TensorFlow"

    # Built here, it has the reference's layers and runs; its .keras file written here loads back to the same
    # layers, weights and outputs. All three share one compiled forward graph (`_forward`).
    keras.utils.set_random_seed(0)
    fresh = references.build(name)
    assert _layers(fresh) == _layers(model)
    forward = _forward(model)
    out = forward(fresh, x)
    assert out.shape == expected.shape and np.isfinite(out).all()
    path = tmp_path / f"{name}.keras"
    fresh.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert _layers(loaded) == _layers(fresh)
    assert all(np.array_equal(numpy(a), numpy(b)) for a, b in zip(loaded.weights, fresh.weights))
    np.testing.assert_array_equal(forward(loaded, x), out)


# The fit step by default on one architecture of each kind of layer stack (convolutions with batch norm, depthwise
# with squeeze-excite, recurrent, tabular, dilated causal); the forward check above still covers every family, and
# `-m slow` runs the fit step on each too (suite time, issue 39: the JAX run's fit steps cost about 50 s).
FIT_STEP_DEFAULT = {"convnet_bn", "mobilenet_v3_blocks", "lstm_classifier", "tabular_resnet", "tcn"}


@pytest.mark.parametrize("name", [p if p.values[0] in FIT_STEP_DEFAULT else
                                  pytest.param(*p.values, marks=(*p.marks, pytest.mark.slow), id=p.id)
                                  for p in map(lambda q: q if hasattr(q, "values") else pytest.param(q), _params())])
def test_one_fit_step_through_zoos_train_step_moves_the_weights(name):
    model, _, expected = _reference(name)
    spec = registry.get_spec(references.family(name))
    batch = sample_input(references.family(name), batch=4)
    if spec.task == "classification":
        y, loss = np.arange(4) % expected.shape[-1], "sparse_categorical_crossentropy"
    else:
        y, loss = np.zeros((4, *expected.shape[1:]), np.float32), "mse"
    initial = model.get_weights()
    # Jitted on JAX, as its users train: one XLA compilation of the step, where JAX's eager dispatch compiles
    # every op of the forward, backward and update on its first call. Plain SGD: the step through zoo's
    # train_step is what is checked, and its update is the smallest graph to compile (Adam's adds a dozen
    # ops per variable; the features' tests cover the optimizers).
    model.compile(keras.optimizers.SGD(1e-2), loss, jit_compile=backend() == "jax")
    history = model.fit(batch, y, batch_size=4, epochs=1, verbose=0).history["loss"]
    assert np.isfinite(history).all()
    assert any(np.abs(a - b).max() > 0 for a, b in zip(model.get_weights(), initial))


# On PyTorch by default, on JAX with `-m slow` too (16 s of the JAX process, its jitted QAT step's compilation).
@(pytest.mark.slow if backend() == "jax" else lambda test: test)
def test_quantization_aware_model_matches_tensorflows_fake_quantization_and_trains():
    from zoo.training import features as F

    model, x, expected = _reference(references.QAT)
    got = numpy(model(x, training=False))
    assert np.abs(got - expected).max() <= TOLERANCE
    y = np.arange(len(x)) % expected.shape[-1]
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", jit_compile=backend() == "jax",
                  features=[F.QuantizationAware(freeze_bn_after=1)])
    initial = model.get_weights()
    model.fit(x, y, batch_size=len(x), epochs=2, verbose=0)
    assert any(np.abs(a - b).max() > 0 for a, b in zip(model.get_weights(), initial))
    frozen = [layer.bn_frozen for layer in model.layers if hasattr(layer, "bn_frozen")]
    assert frozen and all(float(numpy(v)) == 1.0 for v in frozen)  # frozen after the first step
