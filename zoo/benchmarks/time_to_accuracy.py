"""Wall time to a test accuracy: zoo's default recipe against the keras.io simple MNIST convnet.

The baseline is https://keras.io/examples/vision/mnist_convnet/ (Conv32-Pool-
Conv64-Pool-Flatten-Dropout(0.5)-Dense, Adam at 1e-3, batch 128). Both runs
use the same zoo.data MNIST pipeline and the same XLA setting, train epoch by
epoch, and are evaluated on all 10,000 test images after every epoch; the
clock stops during evaluation, so only training time counts.
"""

from __future__ import annotations

import dataclasses
import platform
import time

import keras
import tensorflow as tf

import zoo.data
from zoo.training.config import TrainConfig, load_recipe
from zoo.training.run import build_and_compile, load_splits, resolve_jit_compile


@dataclasses.dataclass
class Curve:
    name: str
    epochs: list = dataclasses.field(default_factory=list)  # (epoch, train seconds so far, test accuracy)
    time_to_target_s: float | None = None
    epochs_to_target: int | None = None


def keras_io_convnet() -> keras.Model:
    """The keras.io "simple MNIST convnet", layer for layer."""
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            layers.Conv2D(32, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax"),
        ],
        name="keras_io_convnet",
    )


class _TestEval(keras.callbacks.Callback):
    """Evaluates on the test set after each epoch, with the training clock paused."""

    def __init__(self, curve: Curve, test_ds, target: float, stop_at_target: bool):
        super().__init__()
        self.curve, self.test_ds, self.target, self.stop_at_target = curve, test_ds, target, stop_at_target
        self.train_s = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._t = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.train_s += time.perf_counter() - self._t
        acc = float(self.model.evaluate(self.test_ds, verbose=0, return_dict=True)["accuracy"])
        self.curve.epochs.append((epoch + 1, round(self.train_s, 2), acc))
        print(f"  {self.curve.name}: epoch {epoch + 1}  {self.train_s:6.1f} s  test accuracy {acc:.4f}", flush=True)
        if self.curve.time_to_target_s is None and acc >= self.target:
            self.curve.time_to_target_s, self.curve.epochs_to_target = round(self.train_s, 2), epoch + 1
            if self.stop_at_target:
                self.model.stop_training = True


def run(recipe: str = "mnist_fast", target: float = 0.99, baseline_epochs: int = 10, seed: int = 0) -> dict:
    """Trains both to `target` (or their epoch budget) and returns the comparison."""
    config = load_recipe(recipe, seed=seed, export_dir=None)
    curves = []

    # zoo's recipe runs its full schedule (its cosine decay is planned for `epochs`).
    keras.utils.set_random_seed(seed)
    train_ds, _, test_ds = load_splits(config)
    info = zoo.data.dataset_info(config.dataset)
    model = build_and_compile(config, info.input_shape, info.output_units, int(train_ds.cardinality()))
    curves.append(_fit(f"zoo:{recipe}", model, train_ds, test_ds, config.epochs, target, stop_at_target=False))

    keras.utils.set_random_seed(seed)
    base_config = TrainConfig(dataset="mnist", batch_size=128, seed=seed)
    train_ds, _, test_ds = load_splits(base_config)
    model = keras_io_convnet()
    model.compile(
        keras.optimizers.Adam(1e-3),
        "sparse_categorical_crossentropy",
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=resolve_jit_compile(config.jit_compile),
    )
    curves.append(_fit("keras.io simple convnet", model, train_ds, test_ds, baseline_epochs, target, stop_at_target=True))

    ours, base = curves
    speedup = None
    if ours.time_to_target_s and base.time_to_target_s:
        speedup = round(base.time_to_target_s / ours.time_to_target_s, 2)
    return {
        "benchmark": "time_to_accuracy",
        "target_test_accuracy": target,
        "machine": {"cpus": _cpu_count(), "platform": platform.platform(), "tensorflow": tf.__version__,
                    "keras": keras.__version__},
        "runs": [dataclasses.asdict(c) for c in curves],
        "speedup_vs_baseline": speedup,
        "baseline_reached_target": base.time_to_target_s is not None,
        "baseline_epoch_budget": baseline_epochs,
    }


def _fit(name, model, train_ds, test_ds, epochs, target, stop_at_target) -> Curve:
    curve = Curve(name)
    model.fit(train_ds, epochs=epochs, verbose=0, shuffle=False,
              callbacks=[_TestEval(curve, test_ds, target, stop_at_target)])
    return curve


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
