"""The backend-neutral tests, run again on JAX and PyTorch (issue 26: every Keras backend).

Keras fixes its backend when it is first imported, so each backend runs in a pytest process of its own:
`KERAS_BACKEND=jax` / `torch` over `BACKEND_NEUTRAL` (the train_step features against the backend's own
autodiff, transfer learning, and every architecture against TensorFlow's outputs on the same weights,
from `.keras` files written here on TensorFlow).
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent
BACKEND_NEUTRAL = ["tests/backends", "tests/training/test_features.py", "tests/training/test_transfer.py"]
SLOW = os.environ.get("ZOO_SLOW") == "1"


@pytest.fixture(scope="module")
def tensorflow_references(tmp_path_factory):
    import zoo
    from tests.backends import references

    directory = tmp_path_factory.mktemp("tensorflow-references")
    names = zoo.list_models()
    references.write(directory, names if SLOW else references.default_names(names))
    return directory


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_backend_neutral_tests_pass_on(backend, tensorflow_references):
    if importlib.util.find_spec(backend) is None:
        if os.environ.get("ZOO_REQUIRE_DATA") == "1":  # scripts/test.sh (CI): setup.sh --dev installs both
            pytest.fail(f"{backend} is not installed; `bash scripts/setup.sh --dev` installs it")
        pytest.skip(f"{backend} is not installed (`bash scripts/setup.sh --dev`)")
    # XLA's quick compilation (no LLVM optimization): the checks need JAX's numbers, not its fastest code.
    xla = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    env = dict(os.environ, KERAS_BACKEND=backend, ZOO_BACKEND_REFERENCE=str(tensorflow_references),
               TF_CPP_MIN_LOG_LEVEL="2", XLA_FLAGS=xla.strip())
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *BACKEND_NEUTRAL]
    if SLOW:
        command += ["-m", "slow or not slow"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, f"on {backend}:\n{tail}"
    assert " passed" in result.stdout and " failed" not in result.stdout, tail


def test_each_shallow_member_has_every_layer_class_of_its_family():
    """What `references.SHALLOW` stands in for on JAX and PyTorch: the first member's layer classes, all of them."""
    from tests.architectures.test_every_architecture import build_small
    from tests.backends import references

    def classes(model):
        return {type(layer) for layer in model._flatten_layers(include_self=False)}

    for name, (first, _, _) in references.SHALLOW.items():
        assert classes(references.build(name)) == classes(build_small(first)), name
