"""`ZooModel`'s train and test steps, one small module per Keras backend.

The step itself (`ZooModel._train_program`: the features' stages in order) is written once, in
`keras.ops`, as a stateful program over Keras variables. What differs between backends is only how
it is run and differentiated, and each module here gives exactly that, following Keras's own
trainers (`keras/src/backend/{tensorflow,jax,torch}/trainer.py`):

- `tensorflow`: `tf.GradientTape`, `tf.cond` to skip an update, `tf.distribute` all-reduces;
- `jax`: the program runs inside a `keras.StatelessScope` over the state Keras's JAX trainer passes
  in and out (plus the features' own state), gradients by `jax.value_and_grad` over the forward pass
  with the trainable values as arguments, and a skipped update is a select, not a branch;
- `torch`: autograd (`torch.autograd.grad`), updates under `torch.no_grad()`.

`for_backend()` imports only the module of the backend Keras runs on, so no other backend (and no
TensorFlow on JAX or PyTorch) is imported.
"""

from __future__ import annotations

import importlib

import keras

from zoo.errors import ZooError

MODULES = {"tensorflow": "zoo.core.trainers.tensorflow", "jax": "zoo.core.trainers.jax",
           "torch": "zoo.core.trainers.torch"}


def for_backend(backend: str | None = None) -> type:
    """The step mixin (`Steps`) of `backend` (default: the one Keras runs on)."""
    backend = backend or keras.backend.backend()
    if backend not in MODULES:
        # Keras's numpy and openvino backends run inference only: building and predicting work,
        # training raises this when compiled.
        return importlib.import_module("zoo.core.trainers.inference_only").Steps
    return importlib.import_module(MODULES[backend]).Steps


def unsupported_backend_error(backend: str) -> ZooError:
    return ZooError(f"Keras backend {backend!r} runs inference only: zoo trains on {sorted(MODULES)}. "
                    f"Set KERAS_BACKEND (or `zoo train --backend`) to one of them.")
