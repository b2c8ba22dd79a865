"""Loss, metrics and the monitored metric for each task a registry model declares."""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras

from zoo.training import losses


@dataclasses.dataclass(frozen=True)
class Task:
    loss: Callable[[], keras.losses.Loss]
    metrics: Callable[[], list]
    monitor: str  # the metric that picks the best checkpoint and measures time-to-target
    mode: str  # "max" or "min"
    # The loss with label smoothing (tasks with class labels only): label_smoothing -> Loss.
    smoothed_loss: Callable[[float], keras.losses.Loss] | None = None

    def build_loss(self, label_smoothing: float = 0.0) -> keras.losses.Loss:
        """The task's loss, label-smoothed by `label_smoothing` where given (class labels only)."""
        if not label_smoothing:
            return self.loss()
        if self.smoothed_loss is None:
            raise ValueError(f"label_smoothing applies to class labels; this task predicts values (monitor "
                             f"{self.monitor!r}). Received: label_smoothing={label_smoothing!r}")
        return self.smoothed_loss(label_smoothing)


TASKS = {
    "classification": Task(
        loss=keras.losses.SparseCategoricalCrossentropy,
        metrics=lambda: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        monitor="accuracy",
        mode="max",
        smoothed_loss=lambda e: losses.SparseCategoricalCrossentropy(label_smoothing=e),
    ),
    # A real-valued target (a table column); the model's output is in the target's own units.
    "regression": Task(
        loss=keras.losses.MeanSquaredError,
        metrics=lambda: [keras.metrics.MeanAbsoluteError(name="mae")],
        monitor="mae",
        mode="min",
    ),
    "forecast": Task(
        loss=keras.losses.MeanSquaredError,
        metrics=lambda: [keras.metrics.MeanAbsoluteError(name="mae")],
        monitor="mae",
        mode="min",
    ),
    # Next-token cross-entropy on the logits language models return; perplexity is exp(loss).
    "language_model": Task(
        loss=lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=lambda: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        monitor="loss",
        mode="min",
        smoothed_loss=lambda e: losses.SparseCategoricalCrossentropy(label_smoothing=e, from_logits=True),
    ),
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"No training task {name!r}; known: {sorted(TASKS)}.")
    return TASKS[name]
