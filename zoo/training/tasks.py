"""Loss, metrics and the monitored metric for each task a registry model declares."""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras


@dataclasses.dataclass(frozen=True)
class Task:
    loss: Callable[[], keras.losses.Loss]
    metrics: Callable[[], list]
    monitor: str  # the metric that picks the best checkpoint and measures time-to-target
    mode: str  # "max" or "min"


TASKS = {
    "classification": Task(
        loss=keras.losses.SparseCategoricalCrossentropy,
        metrics=lambda: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        monitor="accuracy",
        mode="max",
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
    ),
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"No training task {name!r}; known: {sorted(TASKS)}.")
    return TASKS[name]
