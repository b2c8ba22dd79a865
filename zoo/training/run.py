"""One training run: config -> data -> model -> `fit` -> evaluate -> export.

`scripts/train.py` and `zoo train` are thin wrappers over `train()`, so the
same run can be started from Python:

>>> from zoo.training import load_recipe, train
>>> result = train(load_recipe("mnist_fast", epochs=1))
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
from zoo.fileio import ensure_dir
from zoo.training import augment, baselines
from zoo.training.callbacks import WallClock, default_verbose, standard_callbacks
from zoo.training.config import TrainConfig
from zoo.training.tasks import get_task


@dataclasses.dataclass
class TrainResult:
    config: TrainConfig
    model: keras.Model
    history: dict
    test_metrics: dict
    baseline: dict | None
    train_time_s: float
    time_to_target_s: float | None
    export_path: Path | None
    run_dir: Path


def cosine_with_warmup(lr: float, total_steps: int, warmup_fraction: float):
    """Linear warm-up from lr/10 to `lr`, then cosine decay to 0 (Loshchilov & Hutter 2017, SGDR)."""
    warmup = int(total_steps * warmup_fraction)
    return keras.optimizers.schedules.CosineDecay(
        lr / 10 if warmup else lr, max(total_steps - warmup, 1), alpha=0.0, warmup_target=lr if warmup else None,
        warmup_steps=warmup,
    )


def make_optimizer(config: TrainConfig, steps_per_epoch: int | None) -> keras.optimizers.Optimizer:
    """The recipe's optimizer with its learning-rate schedule."""
    lr = config.lr
    if config.schedule == "cosine" and steps_per_epoch:
        lr = cosine_with_warmup(config.lr, steps_per_epoch * config.epochs, config.warmup_fraction)
    if config.optimizer == "adamw":
        return keras.optimizers.AdamW(lr, weight_decay=config.weight_decay)
    if config.optimizer == "adam":
        return keras.optimizers.Adam(lr)
    return keras.optimizers.SGD(lr, momentum=0.9, nesterov=True, weight_decay=config.weight_decay or None)


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


def build_and_compile(config: TrainConfig, input_shape, num_classes, steps_per_epoch: int | None) -> keras.Model:
    """The registry model for `config`, compiled for its task (call inside a strategy scope)."""
    model = registry.build(config.model, input_shape=input_shape, num_classes=num_classes, **config.model_overrides)
    task = get_task(registry.get_spec(config.model).task)
    model.compile(
        optimizer=make_optimizer(config, steps_per_epoch),
        loss=task.loss(),
        metrics=task.metrics(),
        jit_compile=resolve_jit_compile(config.jit_compile),
    )
    return model


def load_splits(config: TrainConfig):
    """(train, val, test) datasets; val/test are None where the config has no such split."""
    def load(split, shuffle):
        return zoo.data.load(
            config.dataset, split, config.batch_size, data_dir=config.data_dir, seed=config.seed, shuffle=shuffle
        )

    train_ds = augment.apply(load(config.train_split, True), config.augment, seed=config.seed)
    val_ds = load(config.val_split, False) if config.val_split else None
    test_ds = load(config.test_split, False) if config.test_split else None
    return train_ds, val_ds, test_ds


def train(config: TrainConfig) -> TrainResult:
    """Trains, evaluates on the full test split and exports; see `TrainConfig`.

    Every name, number and path is checked, and the data located, before
    anything is written.
    """
    config.validate()
    augment.parse(config.augment)
    if config.baseline:
        baselines.get(config.baseline)
    if config.seed is not None:
        keras.utils.set_random_seed(config.seed)
    strategy = distribute.strategy(config.strategy)
    info = zoo.data.dataset_info(config.dataset, data_dir=config.data_dir)
    train_ds, val_ds, test_ds = load_splits(config)

    steps_per_epoch = int(train_ds.cardinality())
    if steps_per_epoch == 0:
        raise ValueError(f"Split {config.train_split!r} of {config.dataset!r} is empty.")
    if steps_per_epoch < 0:  # unknown cardinality
        n = info.splits.get(config.train_split)
        steps_per_epoch = math.ceil(n / config.batch_size) if n else None

    with strategy.scope():
        model = build_and_compile(config, info.input_shape, info.num_classes, steps_per_epoch)

    task = get_task(registry.get_spec(config.model).task)
    monitor = f"val_{task.monitor}" if val_ds is not None else task.monitor
    clock = WallClock(monitor=monitor, target=config.target, mode=task.mode)
    run_dir = ensure_dir(config.run_dir)
    callbacks = standard_callbacks(run_dir, monitor=monitor, mode=task.mode, early_stopping=config.early_stopping)
    verbose = default_verbose() if config.verbose is None else config.verbose
    # shuffle=False: the train pipeline already reshuffles every epoch (Keras would only warn).
    history = model.fit(
        train_ds,
        epochs=config.epochs,
        validation_data=val_ds,
        callbacks=[*callbacks, clock],
        verbose=verbose,
        shuffle=False,
    )

    test_metrics = model.evaluate(test_ds, return_dict=True, verbose=0) if test_ds is not None else {}
    baseline = baselines.run(config) if config.baseline else None
    export_path = None
    if config.export_dir:
        from zoo.deploy import publish_saved_model

        export_path = publish_saved_model(model, config.export_dir, config.model)
    return TrainResult(
        config=config,
        model=model,
        history=history.history,
        test_metrics={k: float(v) for k, v in test_metrics.items()},
        baseline=baseline,
        train_time_s=clock.train_time_s,
        time_to_target_s=clock.time_to_target_s,
        export_path=export_path,
        run_dir=run_dir,
    )
