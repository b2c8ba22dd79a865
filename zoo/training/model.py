"""`ZooModel`: the training base every registry model is built on.

It overrides `train_step` and `test_step` with an explicit
`tf.GradientTape`, so later features (accumulation, clipping, SAM, EMA,
distillation, ...) have one place to hook into, and it keeps the
reported loss correct under `tf.distribute`: Keras' `compute_loss`
divides the loss by the number of replicas (so that summing gradients
across replicas gives the global mean), and the value given to the loss
metric must be multiplied back, or a 2-replica run would report half
the loss of a one-device run.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def unscale_for_distribution(loss):
    """Undoes Keras' per-replica `1 / num_replicas_in_sync` loss scaling."""
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss * tf.cast(replicas, loss.dtype) if replicas > 1 else loss


def batch_size_of(x):
    """The batch size of a (possibly nested) input, as a tensor."""
    first = next(t for t in tf.nest.flatten(x) if t is not None)
    return tf.shape(first)[0]


@keras.saving.register_keras_serializable(package="zoo")
class ZooModel(keras.Model):
    """A functional `keras.Model` with the zoo's own train and test steps.

    Build it like any functional model, `ZooModel(inputs, outputs,
    name=...)`; registry builders do this for you. It saves to `.keras`
    and loads back with `safe_mode=True` (it is registered as
    `zoo>ZooModel`).
    """

    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            # Already divided by the replica count (see module docstring).
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
            # Loss scaling for mixed_float16 (a no-op for other policies).
            scaled_loss = self.optimizer.scale_loss(loss)
        variables = self.trainable_variables
        gradients = tape.gradient(scaled_loss, variables)
        self.optimizer.apply(gradients, variables)
        return self._report(loss, x, y, y_pred, sample_weight)

    def test_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        y_pred = self(x, training=False)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=False)
        return self._report(loss, x, y, y_pred, sample_weight)

    def _report(self, loss, x, y, y_pred, sample_weight):
        """Updates the loss metric with the unscaled loss, then the compiled metrics."""
        # `_loss_tracker` is the Mean metric `compile()` creates and `metrics` reports as
        # "loss"; Keras' own TF trainer updates it exactly like this.
        self._loss_tracker.update_state(unscale_for_distribution(loss), sample_weight=batch_size_of(x))
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
