"""One training run: config -> data -> model -> `fit` -> evaluate -> export.

`scripts/train.py` and `zoo train` are thin wrappers over `train()`, so the
same run can be started from Python:

>>> from zoo.training import load_recipe, train
>>> result = train(load_recipe("mnist_fast", epochs=1))
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import keras
import tensorflow as tf

import zoo.data
from zoo.errors import ZooError
from zoo.fileio import ensure_dir
from zoo.training import augment, baselines, distribute, features, thread_pools
from zoo.training.builders import build_and_compile, load_splits, task_of
from zoo.training.callbacks import (
    NonFiniteGuard,
    NonFiniteLossError,
    ResumableBackup,
    WallClock,
    default_verbose,
    standard_callbacks,
)
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
    resumed_from: dict | None = None  # the backup position this run continued from
    data: object | None = None  # your own data (zoo.data.PathData) when trained with `data`
    weights_report: object = None  # zoo.architectures.weights.LoadReport, with --weights
    preset: object = None  # zoo.core.presets.Preset, with --save-preset


def train(config: TrainConfig, data=None) -> TrainResult:
    """Trains, evaluates on the full test split and exports; see `TrainConfig`.

    With `config.data` (a path) the run trains on your own data (`zoo.training.own_data`);
    `data` is that path already read (`own_data.config_for_data` returns both).

    Every name, number and path is checked, and the data located, before
    anything is written.
    """
    config.validate()
    augment.parse(config.augment)
    if config.baseline:
        baselines.get(config.baseline)
    # The thread pool and the strategy first: both must be set before anything initializes TF.
    thread_pools.set_intra_op_threads(config.intra_op_threads)
    strategy = distribute.strategy(config.strategy)
    if config.seed is not None:
        keras.utils.set_random_seed(config.seed)
    if config.deterministic:
        # Fixed op order and algorithms; with the seed this makes runs bitwise identical.
        tf.config.experimental.enable_op_determinism()
    is_chief = distribute.is_chief(strategy)
    if config.data and data is None:
        from zoo.training import own_data

        data = own_data.read(config)
    if data is not None:
        info = data.dataset_info()
    else:
        info = zoo.data.dataset_info(config.dataset, data_dir=config.data_dir)
    train_ds, val_ds, test_ds = load_splits(config, data)

    steps_per_epoch = int(train_ds.cardinality())
    if steps_per_epoch == 0:
        raise ValueError(f"Split {config.train_split!r} of {config.data or config.dataset!r} is empty.")
    exact_resume = steps_per_epoch > 0
    if steps_per_epoch < 0:  # unknown cardinality
        n = info.splits.get(config.train_split)
        steps_per_epoch = math.ceil(n / config.batch_size) if n else None

    with strategy.scope():
        model = build_and_compile(config, info.input_shape, info.output_units, steps_per_epoch, data=data)

    if config.sanity_check:
        from zoo.training import checks

        report = checks.overfit_batch(model, next(iter(train_ds)))
        if not report.passed:
            raise ZooError(f"Sanity check failed: {report}")
        print(f"sanity check: {report}")

    task = get_task(task_of(config, data))
    # Your own data: early stopping and the best checkpoint follow the loss. Validation splits of a few
    # dozen rows make accuracy a coarse, tied signal (breast_cancer: stopped at epoch 4 of 35, 84% test).
    name, mode = ("loss", "min") if data is not None and config.target is None else (task.monitor, task.mode)
    monitor = f"val_{name}" if val_ds is not None else name
    clock = WallClock(monitor=monitor, target=config.target, mode=mode)
    run_dir = ensure_dir(config.run_dir) if is_chief else Path(config.run_dir)
    guard = NonFiniteGuard(steps_per_epoch)
    backup = ResumableBackup(run_dir / "backup", steps_per_epoch, config.backup_every if exact_resume else None,
                             write=is_chief, guard=guard)
    resumed = backup.restore(model)
    guard.step_offset = backup.global_step
    callbacks = [
        guard,
        backup,
        *standard_callbacks(run_dir, monitor=monitor, mode=mode, early_stopping=config.early_stopping,
                            write_files=is_chief),
        *model.feature_callbacks(),
        clock,
    ]
    verbose = default_verbose() if config.verbose is None else config.verbose
    fit = functools.partial(model.fit, validation_data=val_ds, callbacks=callbacks, verbose=verbose, shuffle=False)
    history = _fit_from(fit, lambda: load_splits(config, data)[0], config, steps_per_epoch if exact_resume else None, backup.epoch,
                        backup.step_in_epoch, multi_worker=distribute.is_multi_worker(strategy))

    if guard.bad_step is not None:
        last = (f"{backup.path} (saved after step {backup.last_saved_step}; kept, re-running the same command "
                f"resumes from it)" if backup.last_saved_step else "none (no step was saved before it)")
        raise NonFiniteLossError(
            f"The training loss became NaN/Inf at step {guard.bad_step} ({guard.bad_where}); training stopped. "
            f"Last good checkpoint: {last}. Lower the learning rate, clip gradients (--clip-norm) or check the data."
        )
    for f in model.train_features:
        if isinstance(f, features.EMA):
            f.copy_to_model()  # evaluate and export the averaged weights
    if is_chief:
        model.save(run_dir / "last.keras")
    backup.cleanup()

    test_metrics = model.evaluate(test_ds, return_dict=True, verbose=0) if test_ds is not None else {}
    baseline = baselines.run(config) if config.baseline and is_chief else None
    export_path = None
    if config.export_dir and is_chief:
        from zoo.formats.saved_model import publish_saved_model

        # Real test (or validation) examples become the version's TF Serving warmup records.
        export_path = publish_saved_model(model, config.export_dir, config.model,
                                          warmup_data=test_ds if test_ds is not None else val_ds)
    test_metrics = {k: float(v) for k, v in test_metrics.items()}
    preset = save_run_preset(model, config, test_metrics) if config.save_preset and is_chief else None
    return TrainResult(
        config=config,
        model=model,
        history=history,
        test_metrics=test_metrics,
        baseline=baseline,
        train_time_s=clock.train_time_s,
        time_to_target_s=clock.time_to_target_s,
        export_path=export_path,
        run_dir=run_dir,
        resumed_from=resumed,
        data=data,
        weights_report=getattr(model, "load_report", None),
        preset=preset,
    )


def save_run_preset(model, config: TrainConfig, test_metrics: dict):
    """The finished run's weights as preset `config.save_preset`, with its recipe, data and test metrics."""
    from zoo.core import presets

    data = {"dataset": config.dataset, "train_split": config.train_split, "test_split": config.test_split}
    if config.data:  # your own data: its path and how it was read (zoo.training.own_data)
        data = {"data": str(config.data), "splits": "train, with validation and test held out"}
    if config.weights:
        data["started_from"] = str(config.weights)
    license = config.preset_license or f"unspecified: the weights inherit the terms of the training data ({config.dataset})"
    return presets.save_preset(
        model, config.save_preset, recipe=dataclasses.asdict(config), data=data,
        metrics={f"test_{k}": v for k, v in test_metrics.items()}, license=license,
        description=config.description or f"{config.model} trained on {config.dataset} ({config.recipe or 'no recipe'})",
    )


def _fit_from(fit, make_train_ds, config: TrainConfig, steps_per_epoch: int | None, epoch: int, step_in_epoch: int,
              multi_worker: bool = False) -> dict:
    """Runs `fit` from (epoch, step_in_epoch) to `config.epochs`; returns the merged history.

    With a known epoch length the data is one repeated stream (epoch e's
    shuffle order is the e-th repetition's, fixed by the seed) and a resumed
    run skips the batches already trained on, so it sees exactly the batches
    an uninterrupted run would. A run killed mid-epoch first finishes that
    epoch (a `fit` of the remaining steps), then runs the rest. Each `fit`
    gets a freshly built dataset: a seeded shuffle's order depends on how many
    times that dataset object has been iterated before.
    """
    if epoch >= config.epochs:
        return {}
    if steps_per_epoch is None:  # unknown length: resume at epoch granularity
        return fit(make_train_ds(), initial_epoch=epoch, epochs=config.epochs).history

    def stream(skip):
        ds = make_train_ds().repeat().skip(skip)
        if multi_worker:
            # Every worker builds the same stream; each takes its replicas' share of every global batch.
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
            ds = ds.with_options(options)
        return ds

    done = epoch * steps_per_epoch + step_in_epoch
    histories = []
    if step_in_epoch:
        histories.append(fit(stream(done), initial_epoch=epoch, epochs=epoch + 1,
                             steps_per_epoch=steps_per_epoch - step_in_epoch).history)
        epoch, done = epoch + 1, (epoch + 1) * steps_per_epoch
    if epoch < config.epochs:
        histories.append(fit(stream(done), initial_epoch=epoch, epochs=config.epochs,
                             steps_per_epoch=steps_per_epoch).history)
    merged: dict = {}
    for h in histories:
        for k, v in h.items():
            merged.setdefault(k, []).extend(v)
    return merged
