"""Adam and AdamW whose per-variable update is one fused TensorFlow kernel, as Keras 2's was.

Keras 3 writes Adam's update from backend-neutral ops (`keras/src/optimizers/adam.py`): per variable
about fifteen kernels (two powers, casts, the moment updates, a square root, a division, three
assignments), each its own pass over the variable, and AdamW's decoupled decay adds four more. On a
CPU that is launch overhead for models with many small variables and memory traffic for models with
large ones. TensorFlow's `ResourceApplyAdam` kernel (`tensorflow/core/kernels/training_ops.cc`, the
one tf.keras 2 called) does the update in one pass, and `ResourceApplyGradientDescent` with the
variable as its own delta does the decay in one; the step's scalars (the bias corrections) are
computed once per step, not once per variable. PyTorch offers the same as `torch.optim.Adam(fused=True)`.

The arithmetic is Keras's (Kingma & Ba 2015, https://arxiv.org/abs/1412.6980, Algorithm 1 with the
"epsilon hat" of its Section 2; decay decoupled as in Loshchilov & Hutter 2019,
https://arxiv.org/abs/1711.05101, scaled by the learning rate as Keras scales it), so weights,
configs, optimizer variables and checkpoints are interchangeable with `keras.optimizers.Adam(W)`.
The fused kernel is used only where it computes what the parent would: TensorFlow backend, float32 or
float64 variables, dense gradients, no AMSGrad, and no `tf.distribute` strategy in scope (a strategy's
replicated variables take the parent's path, which Keras all-reduces and updates per replica).
Everything else goes to the parent's `update_step`.

Measured by `python scripts/benchmark.py training` (zoo's fit against stock Keras, same weights and data).
"""

from __future__ import annotations

import keras

FUSED_DTYPES = ("float32", "float64")


def _tf_variable(variable):
    return variable.value if isinstance(variable, keras.Variable) else variable


class _FusedAdamUpdate:
    """The fused update of `keras.optimizers.Adam` and `AdamW`; mixed in before the Keras class."""

    _step_scalars: dict | None = None

    def fuses(self, gradient, variable) -> bool:
        """True where the update takes the fused kernel (and computes what the parent would)."""
        if keras.backend.backend() != "tensorflow" or self.amsgrad:
            return False  # other backends: Keras's update, written in keras.ops
        import tensorflow as tf

        return (
            not isinstance(gradient, tf.IndexedSlices)
            and not tf.distribute.has_strategy()
            and _tf_variable(variable).dtype.name in FUSED_DTYPES
        )

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        self._step_scalars = {}  # the step's scalars, per dtype, shared by every variable of the step
        try:
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        finally:
            self._step_scalars = None

    def _scalars(self, dtype, learning_rate):
        """(beta_1 ** t, beta_2 ** t, lr, beta_1, beta_2, epsilon) in `dtype`, t = iterations + 1 as Keras counts."""
        import tensorflow as tf

        cache = self._step_scalars
        if cache is not None and dtype in cache:
            return cache[dtype]
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        scalars = (tf.pow(beta_1, step), tf.pow(beta_2, step), tf.cast(learning_rate, dtype), beta_1, beta_2,
                   tf.cast(self.epsilon, dtype))
        if cache is not None:
            cache[dtype] = scalars
        return scalars

    def update_step(self, gradient, variable, learning_rate):
        if not self.fuses(gradient, variable):
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        var = _tf_variable(variable)
        index = self._get_variable_index(variable)
        m, v = _tf_variable(self._momentums[index]), _tf_variable(self._velocities[index])
        beta_1_power, beta_2_power, lr, beta_1, beta_2, epsilon = self._scalars(var.dtype, learning_rate)
        tf.raw_ops.ResourceApplyAdam(
            var=var.handle, m=m.handle, v=v.handle, beta1_power=beta_1_power, beta2_power=beta_2_power, lr=lr,
            beta1=beta_1, beta2=beta_2, epsilon=epsilon, grad=tf.cast(gradient, var.dtype), use_locking=False)

    def _apply_weight_decay(self, variables):
        if self.weight_decay is None:
            return None
        fused = [v for v in variables if self.fuses(None, v)]
        if len(fused) < len(variables):  # a strategy in scope or other dtypes: the parent's path for all
            return super()._apply_weight_decay(variables)
        import tensorflow as tf

        for variable in fused:
            if self._use_weight_decay(variable):
                var = _tf_variable(variable)
                alpha = tf.cast(self.learning_rate, var.dtype) * tf.cast(self.weight_decay, var.dtype)
                # var -= alpha * var, in one pass (Keras: read, two multiplies, subtract, assign)
                tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=alpha, delta=var.read_value(),
                                                        use_locking=False)
        return None


@keras.saving.register_keras_serializable(package="zoo")
class FusedAdam(_FusedAdamUpdate, keras.optimizers.Adam):
    """`keras.optimizers.Adam` with the fused update of the module docstring; same arguments and config."""


@keras.saving.register_keras_serializable(package="zoo")
class FusedAdamW(_FusedAdamUpdate, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with the fused update and decay of the module docstring; same arguments and config."""
