"""Freezing the backbone to train a new head, then (optionally) unfreezing everything at a lower learning rate.

The two phases of the Keras transfer-learning guide
(https://keras.io/guides/transfer_learning/): first only the head learns,
on top of frozen pretrained features; then the whole model is fine-tuned
with a learning rate low enough not to wreck those features.

Frozen layers get `trainable = False`, which in Keras 3 also runs
BatchNormalization in inference mode (moving statistics, not the batch's,
and no updates to them), as the guide prescribes: otherwise the first
unfrozen steps would meet statistics drifted away from the pretrained ones.

The optimizer is built over every variable before freezing, so its slots
exist when the backbone joins in. At `unfreeze_at` (epochs done), a callback
makes the backbone trainable, multiplies the learning rate (or schedule) by
`lr_factor`, rebuilds the other features' state for the new variable set
(EMA and accumulation restart there) and retraces the train step.
BatchNormalization layers stay frozen when the rest unfreezes, as the guide
says: switched to batch statistics, they would shift every activation at
once and undo what the head has learned (`results/layers/README.md` has the
measurement).
"""

from __future__ import annotations

import keras

from zoo.architectures.heads import split_head
from zoo.core.model import RetraceGuard, inner_optimizer
from zoo.core.train_step import TrainFeature


@keras.saving.register_keras_serializable(package="zoo")
class ScaledSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A learning-rate schedule times a constant factor."""

    def __init__(self, schedule, factor: float):
        if not 0 < factor:
            raise ValueError(f"factor must be > 0. Received: factor={factor!r}")
        self.schedule = schedule
        self.factor = float(factor)

    def __call__(self, step):
        return self.schedule(step) * self.factor

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule), "factor": self.factor}

    @classmethod
    def from_config(cls, config):
        return cls(keras.saving.deserialize_keras_object(config["schedule"]), config["factor"])


class FreezeBackbone(TrainFeature):
    """Trains only the head (see `zoo.architectures.heads`); with `unfreeze_at`, everything after that many epochs.

    Args:
        unfreeze_at: epochs trained frozen; None keeps the backbone frozen throughout.
        lr_factor: the learning rate is multiplied by this when unfreezing.
    """

    name = "freeze"
    order = 1  # built first: every other feature sees the frozen variable set

    def __init__(self, unfreeze_at: int | None = None, lr_factor: float = 0.1):
        if unfreeze_at is not None and (isinstance(unfreeze_at, bool) or not isinstance(unfreeze_at, int)
                                        or unfreeze_at < 1):
            raise ValueError(f"unfreeze_at must be a positive integer or None. Received: unfreeze_at={unfreeze_at!r}")
        if not 0 < lr_factor <= 1:
            raise ValueError(f"lr_factor must be in (0, 1]. Received: lr_factor={lr_factor!r}")
        self.unfreeze_at = unfreeze_at
        self.lr_factor = float(lr_factor)
        self.unfrozen = False

    @classmethod
    def from_config(cls, config):
        return cls(config.unfreeze_at, config.unfreeze_lr_factor)

    def build(self, model):
        if self.unfrozen:
            return  # rebuilt after unfreezing (see `unfreeze`): nothing to freeze any more
        self._backbone, _ = split_head(model)
        optimizer = inner_optimizer(model.optimizer)
        if optimizer is not None and not optimizer.built:
            optimizer.build(model.trainable_variables)  # every variable, frozen ones included
        for layer in self._backbone:
            layer.trainable = False  # BatchNormalization: inference mode too

    def unfreeze(self, model) -> None:
        """Makes the backbone trainable, lowers the learning rate and rebuilds the train step."""
        for layer in self._backbone:
            if not isinstance(layer, keras.layers.BatchNormalization):
                layer.trainable = True
        optimizer = inner_optimizer(model.optimizer)
        if self.lr_factor != 1:
            lr = optimizer._learning_rate  # the schedule object or the variable, as Keras keeps it
            if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
                optimizer.learning_rate = ScaledSchedule(lr, self.lr_factor)
            else:
                optimizer.learning_rate = float(keras.ops.convert_to_numpy(lr)) * self.lr_factor
        self.unfrozen = True
        model.set_features(model.train_features)  # state sized for the new trainable variables
        model.retrace_guard = RetraceGuard()  # one more trace here is expected, not a retracing bug
        model.make_train_function(force=True)

    def callbacks(self):
        return [UnfreezeAt(self)] if self.unfreeze_at is not None else []


class UnfreezeAt(keras.callbacks.Callback):
    """Unfreezes at the start of epoch `unfreeze_at` (0-based), or of the first epoch after it on resume."""

    def __init__(self, feature: FreezeBackbone):
        super().__init__()
        self.feature = feature

    def on_epoch_begin(self, epoch, logs=None):
        if not self.feature.unfrozen and epoch >= self.feature.unfreeze_at:
            self.feature.unfreeze(self.model)
