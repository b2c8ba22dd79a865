"""Reference gradients for the tests, from the backend's own autodiff and nothing of zoo's train step.

`loss_and_grads(model, x, y)` is what a hand-written training loop computes on each backend
(`tf.GradientTape`, `jax.value_and_grad` over the variables' values, `torch.autograd.grad`), so a
train_step feature's update can be checked against it on TensorFlow, JAX and PyTorch alike.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops


def backend() -> str:
    return keras.backend.backend()


def numpy(t) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(t))


def mean_sparse_ce(y, y_pred):
    return ops.mean(keras.losses.sparse_categorical_crossentropy(y, y_pred))


def loss_and_grads(model, x, y, forward=None, training=True):
    """(loss, gradients as NumPy arrays) of mean sparse cross-entropy of `forward(x)` (default: the model)."""
    forward = forward or (lambda t, training: model(t, training=training))
    variables = model.trainable_variables
    if backend() == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = mean_sparse_ce(y, forward(x, training=training))
        grads = tape.gradient(loss, variables)
    elif backend() == "jax":
        import jax

        others = [v for v in model.variables if not any(v is t for t in variables)]

        def of(values):
            mapping = list(zip(variables, values)) + [(v, v.value) for v in others]
            with keras.StatelessScope(state_mapping=mapping):
                return mean_sparse_ce(y, forward(x, training=training))

        # Jitted: op-by-op JAX would take a minute for a ResNet's gradient on 2 cores.
        loss, grads = jax.jit(jax.value_and_grad(of))([v.value for v in variables])
    else:
        import torch

        loss = mean_sparse_ce(y, forward(x, training=training))
        grads = torch.autograd.grad(loss, [v.value for v in variables])
    return float(numpy(loss)), [numpy(g) for g in grads]


def global_norm(grads) -> float:
    return float(np.sqrt(sum(float(np.sum(np.square(g.astype(np.float64)))) for g in grads)))
