"""Checks that catch silent training bugs before a long run.

- `gradients(fn_or_layer, inputs)`: autodiff against central finite
  differences in float64 (catches a wrong `tf.custom_gradient`).
- `overfit_batch(model, batch)`: the model can drive the loss on one batch
  near zero (catches a broken loss, label pipeline or frozen weights);
  `zoo train --sanity-check` runs it first.

>>> import tensorflow as tf, zoo.training.checks
>>> zoo.training.checks.gradients(tf.math.log_sigmoid, tf.random.normal((4, 3))).passed
True
"""

from __future__ import annotations

import dataclasses

import contextlib

import keras
import numpy as np


@dataclasses.dataclass
class GradientReport:
    max_relative_error: float
    worst: str  # where the largest error is: "input[3]" or "kernel[1, 2]", with both values
    checked: int  # number of scalar entries compared
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_relative_error <= self.tolerance

    def __str__(self):
        verdict = "ok" if self.passed else "MISMATCH"
        return f"gradient check {verdict}: max relative error {self.max_relative_error:.2e} at {self.worst} ({self.checked} entries)"


def _float64_copy(layer: keras.layers.Layer, sample):
    """The same layer computing in float64, with the same weights (rebuilt from `get_config`)."""
    config = {**layer.get_config(), "dtype": "float64"}
    clone = layer.__class__.from_config(config)
    clone(sample)
    for target, source in zip(clone.weights, layer.weights):
        target.assign(np.asarray(keras.ops.convert_to_numpy(source), dtype=np.float64))
    return clone


def gradients(fn_or_layer, inputs, *, epsilon: float = 1e-6, tolerance: float = 1e-6, max_entries: int = 2000,
              seed: int = 0) -> GradientReport:
    """Compares autodiff gradients of `fn_or_layer` with central finite differences, in float64.

    The output is reduced to a scalar with fixed random weights, so every
    output entry contributes. Gradients are checked with respect to the
    inputs and, for a layer, its trainable weights. The relative error of
    each entry is |a - n| / max(|a|, |n|, 1e-8).

    It differentiates with `tf.GradientTape`: the TensorFlow backend only (elsewhere a clear error; the
    backend-neutral check of a model's gradients is each backend's own autodiff against this one).
    """
    if keras.backend.backend() != "tensorflow":
        from zoo.errors import ZooError

        raise ZooError(f"zoo.training.checks.gradients differentiates with tf.GradientTape, so it runs on the "
                       f"TensorFlow backend only, not {keras.backend.backend()!r}: run it with KERAS_BACKEND=tensorflow.")
    import tensorflow as tf

    x = tf.constant(np.asarray(inputs, dtype=np.float64))
    if isinstance(fn_or_layer, keras.layers.Layer):
        layer = _float64_copy(fn_or_layer, x)  # a layer would otherwise autocast float64 inputs down
        fn, variables = layer, [v.value if isinstance(v, keras.Variable) else v for v in layer.trainable_weights]
    else:
        fn, variables = fn_or_layer, []
    out = tf.cast(fn(x), tf.float64)
    projection = tf.constant(np.random.default_rng(seed).standard_normal(out.shape.as_list()), tf.float64)

    def scalar(t):
        return tf.reduce_sum(tf.cast(fn(t), tf.float64) * projection)

    with tf.GradientTape() as tape:
        tape.watch(x)
        value = scalar(x)
    analytic = tape.gradient(value, [x, *variables])
    names = ["input", *(getattr(v, "name", f"weight{i}") for i, v in enumerate(variables))]
    worst, worst_at, checked = 0.0, "-", 0
    for name, target, grad in zip(names, [x, *variables], analytic):
        grad = np.zeros(target.shape) if grad is None else tf.convert_to_tensor(grad).numpy()
        base = target.numpy().copy()
        for index in np.ndindex(base.shape):
            if checked >= max_entries:
                break
            numeric = []
            for sign in (1, -1):
                bumped = base.copy()
                bumped[index] += sign * epsilon
                if target is x:
                    numeric.append(float(scalar(tf.constant(bumped))))
                else:
                    target.assign(bumped)
                    numeric.append(float(scalar(x)))
            if target is not x:
                target.assign(base)
            n = (numeric[0] - numeric[1]) / (2 * epsilon)
            a = float(grad[index])
            err = abs(a - n) / max(abs(a), abs(n), 1e-8)
            checked += 1
            if err > worst or worst_at == "-":
                worst, worst_at = err, f"{name}{list(index)} (autodiff {a:.6g}, finite difference {n:.6g})"
    return GradientReport(worst, worst_at, checked, tolerance)


@dataclasses.dataclass
class OverfitReport:
    initial_loss: float
    final_loss: float
    steps: int
    target_loss: float

    @property
    def passed(self) -> bool:
        return self.final_loss <= self.target_loss

    def __str__(self):
        verdict = "ok" if self.passed else "FAILED"
        return (f"overfit one batch {verdict}: loss {self.initial_loss:.4f} -> {self.final_loss:.4f} in {self.steps} "
                f"steps (target <= {self.target_loss:.4f})")


def overfit_batch(model: keras.Model, batch, *, steps: int = 300, lr: float = 3e-3, relative_target: float = 0.05,
                  check_every: int = 25) -> OverfitReport:
    """Trains a copy of `model` on one batch and checks the loss falls below `relative_target` x its start.

    `model` must be compiled (its loss is used) and is left untouched. A
    model that cannot memorize one batch has a bug: a wrong loss or label
    format, a detached layer, frozen weights. The loss is measured in
    inference mode, so dropout does not hide success.
    """
    if model.loss is None:
        raise ValueError("overfit_batch needs a compiled model (it uses the model's loss).")
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(batch)
    x = keras.ops.convert_to_numpy(x)
    y = keras.ops.convert_to_numpy(y)
    scope = model.distribute_strategy.scope() if keras.backend.backend() == "tensorflow" else contextlib.nullcontext()
    with scope:
        clone = keras.models.clone_model(model)
        clone.set_weights(model.get_weights())
        clone.compile(optimizer=keras.optimizers.Adam(lr), loss=model.loss, jit_compile=False)
    initial = float(clone.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)["loss"])
    target = relative_target * initial
    final, done = initial, 0
    while done < steps:
        for _ in range(check_every):
            clone.train_on_batch(x, y)
        done += check_every
        final = float(clone.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)["loss"])
        if final <= target:
            break
    return OverfitReport(initial, final, done, target)
