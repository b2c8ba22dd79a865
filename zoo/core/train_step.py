"""The interface every train_step feature implements, and the small distribution helpers they share.

`ZooModel.train_step` runs one fixed pipeline; a feature hooks into the
stages it needs and leaves the others alone:

    prepare_model     model -> model, before compile  (quantization-aware training)
    transform_batch   batch -> batch               (mixup, cutmix)
    wrap_forward      forward(x) -> forward'(x)    (gradient checkpointing)
    wrap_loss         loss(batch, y_pred) -> ...   (distillation)
    scale_loss / unscale_gradients                 (mixed precision)
    wrap_gradients    grads(batch) -> ...          (sharpness-aware minimization)
    gate              (grads, ready) -> ...        (accumulation, overflow skipping)
    transform_gradients                            (clipping)
    after_update      applied -> state updates     (EMA, loss-scale growth)

Features are sorted by `order` before composing, so the result does not
depend on the order a user lists them in. Gradients a feature sees are the
global-batch gradients (all-reduced across replicas, loss scale removed),
so every feature gives the same result on one device and under
`MirroredStrategy`.

Features are written in `keras.ops` against Keras variables, so each runs on
TensorFlow, JAX and PyTorch alike (`zoo.core.trainers` runs the step per
backend); one that cannot declares the backends it runs on (`backends`) and is
refused at `compile` on the others, by name. Two rules keep a feature portable:
a condition is a select (`select`, `ops.where`), never a branch that assigns
(JAX's branches cannot), and `ready`/`applied` may be a Python bool or a bool tensor.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import keras
from keras import ops


def on_tensorflow() -> bool:
    """Whether Keras runs on TensorFlow, the only backend with `tf.distribute` replicas."""
    return keras.backend.backend() == "tensorflow"


@dataclasses.dataclass
class Batch:
    """One training batch inside the step; `mix` holds `(y_other, lam)` after mixup/cutmix."""

    x: Any
    y: Any
    sample_weight: Any = None
    mix: tuple | None = None


class TrainFeature:
    """A composable piece of `ZooModel.train_step`; override only the hooks you need."""

    name = "feature"
    order = 50
    needs_global_gradients = False  # True: the step all-reduces gradients before this feature sees them
    backends = ("tensorflow", "jax", "torch")  # the Keras backends it runs on; compile refuses the others

    def check_backend(self, backend: str) -> None:
        """Refuses, naming this feature and `backend`, a backend the feature does not run on."""
        if backend not in self.backends:
            from zoo.errors import ZooError

            raise ZooError(f"The {self.name!r} train_step feature does not run on the {backend!r} backend (it runs on "
                           f"{', '.join(self.backends)}). Train on one of those (KERAS_BACKEND or `zoo train "
                           f"--backend`), or leave the feature out.")

    def prepare_model(self, model: keras.Model) -> keras.Model:
        """Returns the model to train (called once, before `compile`); most features keep it."""
        return model

    def build(self, model: keras.Model) -> None:
        """Creates state (called by `compile`, inside the model's strategy scope)."""

    def transform_batch(self, model, batch: Batch, step) -> Batch:
        return batch

    def wrap_forward(self, model, forward):
        return forward

    def wrap_loss(self, model, loss_fn):
        return loss_fn

    def scale_loss(self, loss):
        return loss

    def unscale_gradients(self, grads):
        return grads

    def wrap_gradients(self, model, grad_fn):
        return grad_fn

    def gate(self, model, grads, ready):
        """Returns the gradients to apply and whether to apply them this step."""
        return grads, ready

    def transform_gradients(self, model, grads):
        return grads

    def after_update(self, model, applied, ready) -> None:
        """`applied`: the optimizer stepped; `ready`: this step ended a (possibly accumulated) update."""

    def after_fit(self, model) -> None:
        """Called once `fit` has returned, before the final evaluation, the saved model and the export
        (`zoo.training.run.execute`): e.g. EMA puts its averaged weights into the model."""

    def state_variables(self) -> list:
        """Variables a resumable checkpoint must save."""
        return []

    def callbacks(self) -> list:
        return []

    @classmethod
    def from_config(cls, config) -> "TrainFeature":
        """This feature as a `TrainConfig` asks for it; called when a knob declared with
        `feature=` this class is switched on (see `zoo.training.knobs`)."""
        raise NotImplementedError(f"{cls.__name__} is not switched on by any TrainConfig knob.")

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def state_variable(shape, dtype="float32", name="state", initializer="zeros"):
    """A non-trainable variable that can be assigned inside a replica context.

    `only_first_replica`: every replica computes the same value (the inputs are
    all-reduced), so the first one's is kept. Outside `tf.distribute` the aggregation does nothing.
    """
    if dtype == "int64" and keras.backend.backend() == "jax":
        import jax

        if not jax.config.jax_enable_x64:
            dtype = "int32"  # JAX keeps 32-bit integers unless x64 is on (and warns for every int64 asked)
    return keras.Variable(
        initializer=initializer, shape=shape, dtype=dtype, trainable=False, name=name,
        aggregation="only_first_replica",
    )


def num_replicas() -> int:
    """Replicas of the `tf.distribute` strategy in scope; 1 on JAX and PyTorch, whose steps see the global
    batch (a `keras.distribution.DataParallel` step is one program over the sharded batch)."""
    if not on_tensorflow():
        return 1
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync


def all_reduce_sum(values):
    """Sums a list of tensors over replicas (identity on one replica)."""
    if num_replicas() == 1:
        return values
    import tensorflow as tf

    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, values)


def scale_for_distribution(loss):
    """Divides a per-replica mean loss by the replica count, as Keras' `compute_loss` does."""
    n = num_replicas()
    return loss / ops.cast(n, loss.dtype) if n > 1 else loss


def add_to_variables(variables, deltas):
    """`v += d` for every pair, from a replica context, on every replica's copy."""
    if num_replicas() == 1:
        for v, d in zip(variables, deltas):
            v.assign_add(ops.cast(d, v.dtype))
        return
    import tensorflow as tf

    if tf.__internal__.distribute.strategy_supports_no_merge_call():
        for v, d in zip(variables, deltas):
            v.assign_add(tf.cast(d, v.dtype))
        return

    def merged(strategy, deltas):
        for v, d in zip(variables, deltas):
            strategy.extended.update(v.value if isinstance(v, keras.Variable) else v,
                                     lambda var, delta: var.assign_add(tf.cast(delta, var.dtype)), args=(d,))

    tf.distribute.get_replica_context().merge_call(merged, args=(deltas,))


def global_norm(grads):
    """sqrt(sum of squares) over every gradient, in float32 (`tf.linalg.global_norm`'s definition)."""
    squares = [ops.sum(ops.square(ops.cast(g, "float32"))) for g in grads if g is not None]
    return ops.sqrt(ops.sum(ops.stack(squares))) if squares else ops.zeros((), "float32")


def select(condition, new, old):
    """`new` where the scalar `condition` holds, else `old` (a Python bool picks without an op)."""
    if isinstance(condition, bool):
        return new if condition else old
    return ops.where(condition, new, ops.cast(old, new.dtype) if hasattr(new, "dtype") else old)
