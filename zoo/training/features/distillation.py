"""Knowledge distillation from a teacher (Hinton et al. 2015, https://arxiv.org/abs/1503.02531).

loss = alpha * CE(y, student) + (1 - alpha) * T^2 * KL(softmax(teacher/T) || softmax(student/T)).

The zoo's classifiers end in a softmax, so logits are recovered as
log-probabilities (softmax is shift-invariant, so log p / T tempers exactly
like z / T); pass `from_logits=True` for models that output logits.
"""

from __future__ import annotations

import keras
from keras import ops

from zoo.core.train_step import TrainFeature, scale_for_distribution


class Distillation(TrainFeature):
    name = "distillation"
    order = 50

    def __init__(self, teacher: keras.Model, alpha: float = 0.5, temperature: float = 4.0, from_logits: bool = False):
        if not isinstance(teacher, keras.Model):
            raise TypeError(f"teacher must be a keras.Model. Received: {type(teacher).__name__}")
        if not 0 <= alpha <= 1:
            raise ValueError(f"alpha must be in [0, 1]. Received: alpha={alpha}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0. Received: temperature={temperature}")
        self.teacher, self.alpha, self.temperature, self.from_logits = teacher, float(alpha), float(temperature), from_logits

    @classmethod
    def from_config(cls, config):
        """The teacher is the saved model `config.teacher` names (scanned, then loaded frozen in Keras's
        safe mode without its optimizer: `zoo.deploy.artifacts.load_model_file`)."""
        from zoo.deploy.artifacts import load_model_file

        teacher = load_model_file(config.teacher, compile=False)
        teacher.trainable = False
        return cls(teacher, config.distill_alpha, config.distill_temperature)

    def build(self, model):
        student_shape, teacher_shape = tuple(model.output_shape), tuple(self.teacher.output_shape)
        if student_shape != teacher_shape:
            raise ValueError(
                f"The teacher's output shape {teacher_shape} does not match the student's {student_shape}: "
                "distillation compares their class distributions, so both must predict the same classes."
            )
        self.teacher.trainable = False

    def _log_tempered(self, outputs):
        outputs = ops.cast(outputs, "float32")
        logits = outputs if self.from_logits else ops.log(ops.maximum(outputs, 1e-12))
        return ops.log_softmax(logits / self.temperature, axis=-1)

    def soft_loss(self, teacher_out, student_out):
        """T^2 * mean KL(teacher || student) over the batch."""
        log_t, log_s = self._log_tempered(teacher_out), self._log_tempered(student_out)
        kl = ops.sum(ops.exp(log_t) * (log_t - log_s), axis=-1)
        return self.temperature**2 * ops.mean(kl)

    def wrap_loss(self, model, loss_fn):
        def distilled(batch, y_pred):
            hard = loss_fn(batch, y_pred)  # already divided by the replica count
            soft = self.soft_loss(ops.stop_gradient(self.teacher(batch.x, training=False)), y_pred)
            return self.alpha * hard + (1 - self.alpha) * scale_for_distribution(soft)

        return distilled
