"""One training run: config -> data -> model -> `fit` -> evaluate -> export.

`scripts/train.py` and `zoo train` are thin wrappers over `train()`, so the
same run can be started from Python.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import keras
import tensorflow as tf

import zoo.data
from zoo import distribute
from zoo.architectures import registry
from zoo.errors import UnknownNameError
from zoo.fileio import check_dir_creatable, ensure_dir
from zoo.training.callbacks import WallClock, default_verbose, standard_callbacks


@dataclasses.dataclass
class TrainConfig:
    """Everything one run needs. The defaults are the default MNIST recipe."""

    model: str = "convnet_bn"
    dataset: str = "mnist"
    epochs: int = 3
    batch_size: int = 128
    lr: float = 3e-3
    weight_decay: float = 1e-4
    warmup_fraction: float = 1 / 6
    label_smoothing: float = 0.0
    strategy: str = "auto"
    seed: int | None = 0
    out: str = "runs"
    train_split: str = "train"
    val_split: str | None = "test"
    test_split: str | None = "test"
    export_dir: str | None = "saved_models"
    early_stopping: int | None = None
    target_accuracy: float | None = 0.99
    data_dir: str | None = None
    jit_compile: str | bool = "auto"
    model_overrides: dict = dataclasses.field(default_factory=dict)
    verbose: int | None = None

    def validate(self) -> None:
        """Checks every name and number before any work starts."""
        for field in ("epochs", "batch_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive integer. Received: {field}={value!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0. Received: lr={self.lr}")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1). Received: {self.warmup_fraction}")
        registry.get_spec(self.model)
        if self.strategy not in distribute.STRATEGIES:
            raise UnknownNameError("strategy", self.strategy, distribute.STRATEGIES)
        for path in (self.out, self.export_dir):
            if path:
                _check_output_dir(path)

    @property
    def run_dir(self) -> Path:
        return Path(self.out) / f"{self.model}-{self.dataset}"


@dataclasses.dataclass
class TrainResult:
    model: keras.Model
    history: dict
    test_metrics: dict
    train_time_s: float
    time_to_target_s: float | None
    export_path: Path | None
    run_dir: Path


def _check_output_dir(path) -> None:
    try:
        check_dir_creatable(path)
    except NotADirectoryError as e:
        raise ValueError(f"Output path {str(path)!r} cannot be used: {e}") from None


def cosine_with_warmup(lr: float, total_steps: int, warmup_fraction: float):
    """Linear warm-up from lr/10 to `lr`, then cosine decay to 0 (Loshchilov & Hutter 2017, SGDR)."""
    warmup = int(total_steps * warmup_fraction)
    return keras.optimizers.schedules.CosineDecay(
        lr / 10 if warmup else lr, max(total_steps - warmup, 1), alpha=0.0, warmup_target=lr if warmup else None,
        warmup_steps=warmup,
    )


def resolve_jit_compile(setting: str | bool) -> bool:
    """XLA on accelerators only, for "auto".

    Keras' own "auto" turns XLA on for every device, but XLA's CPU
    convolutions are several times slower than oneDNN's: measured here,
    `convnet_bn` trains at 29 s/epoch with XLA and 7 s/epoch without on
    2 cores (`scripts/benchmark.py` re-measures this).
    """
    if setting == "auto":
        return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))
    if not isinstance(setting, bool):
        raise ValueError(f"jit_compile must be 'auto', True or False. Received: jit_compile={setting!r}")
    return setting


def train(config: TrainConfig) -> TrainResult:
    """Trains, evaluates on the full test split and exports; see `TrainConfig`."""
    config.validate()
    if config.seed is not None:
        keras.utils.set_random_seed(config.seed)
    strategy = distribute.strategy(config.strategy)

    info = zoo.data.dataset_info(config.dataset, data_dir=config.data_dir)
    load = lambda split, **kw: zoo.data.load(  # noqa: E731
        config.dataset, split, config.batch_size, data_dir=config.data_dir, seed=config.seed, **kw
    )
    train_ds = load(config.train_split, shuffle=True)
    val_ds = load(config.val_split, shuffle=False) if config.val_split else None
    test_ds = load(config.test_split, shuffle=False) if config.test_split else None

    steps_per_epoch = int(train_ds.cardinality())
    if steps_per_epoch < 1:
        n = info.splits.get(config.train_split)
        steps_per_epoch = math.ceil(n / config.batch_size) if n else None
    if steps_per_epoch == 0:
        raise ValueError(f"Split {config.train_split!r} of {config.dataset!r} is empty.")

    with strategy.scope():
        model = registry.build(
            config.model, input_shape=info.input_shape, num_classes=info.num_classes, **config.model_overrides
        )
        schedule = (
            cosine_with_warmup(config.lr, steps_per_epoch * config.epochs, config.warmup_fraction)
            if steps_per_epoch
            else config.lr
        )
        model.compile(
            optimizer=keras.optimizers.AdamW(schedule, weight_decay=config.weight_decay),
            loss=keras.losses.SparseCategoricalCrossentropy(),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            jit_compile=resolve_jit_compile(config.jit_compile),
        )

    run_dir = ensure_dir(config.run_dir)
    monitor = "val_accuracy" if val_ds is not None else "accuracy"
    clock = WallClock(monitor=monitor, target=config.target_accuracy)
    callbacks = standard_callbacks(run_dir, monitor=monitor, early_stopping=config.early_stopping) + [clock]
    verbose = default_verbose() if config.verbose is None else config.verbose
    # shuffle=False: the train pipeline already reshuffles every epoch (Keras would only warn).
    history = model.fit(
        train_ds, epochs=config.epochs, validation_data=val_ds, callbacks=callbacks, verbose=verbose, shuffle=False
    )

    test_metrics = model.evaluate(test_ds, return_dict=True, verbose=0) if test_ds is not None else {}
    export_path = None
    if config.export_dir:
        from zoo.deploy import publish_saved_model

        export_path = publish_saved_model(model, config.export_dir, config.model)
    return TrainResult(
        model=model,
        history=history.history,
        test_metrics={k: float(v) for k, v in test_metrics.items()},
        train_time_s=clock.train_time_s,
        time_to_target_s=clock.time_to_target_s,
        export_path=export_path,
        run_dir=run_dir,
    )
