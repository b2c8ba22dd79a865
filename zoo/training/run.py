"""One training run: `execute(plan)` runs a `zoo.training.planner.TrainPlan`: data -> model -> `fit` -> evaluate
-> export.

`scripts/train.py` and `zoo train` are thin wrappers over `plan` then `execute`, so the same run can be
started from Python:

>>> from zoo.training import execute, load_recipe, plan, train
>>> result = execute(plan("mnist_fast", epochs=1))
>>> result = train(load_recipe("mnist_fast", epochs=1))   # the same, from a config
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np

from zoo.data import batches
from zoo.errors import ZooError
from zoo.run_dir import RunDir
from zoo.training import backends, baselines, distribute, multi_worker, thread_pools
from zoo.training.builders import build_and_compile, load_splits, load_train
from zoo.training.callbacks import (
    NonFiniteGuard,
    NonFiniteLossError,
    ResumableBackup,
    WallClock,
    default_verbose,
    kept_epoch,
    outside_distribution,
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
    data: object | None = None  # the data trained on (a zoo.data.source.DataSource: zoo.data.PathData for your own)
    weights_report: object = None  # zoo.architectures.weights.LoadReport, with --weights
    preset: object = None  # zoo.core.presets.Preset, with --save-preset
    epochs_run: int = 0  # epochs trained in this run
    kept_epoch: int | None = None  # with early stopping: the (1-based) epoch whose weights the model holds
    kept_value: str = ""  # that epoch's monitored value, e.g. "val_loss 0.1234"
    stopped_because: str = ""  # early stopping, the time limit, or the last epoch
    backend: str = "tensorflow"  # the Keras backend it trained on
    notes: tuple = ()  # what the run left out, and why (e.g. no SavedModel without TensorFlow)


def train(config: TrainConfig, data=None) -> TrainResult:
    """Trains, evaluates on the full test split and exports; see `TrainConfig`: `execute(plan(config, data))`.

    With `config.data` (a path) the run trains on your own data (`zoo.training.own_data`);
    `data` is that data already read (a `zoo.data.source.DataSource`, e.g. `planner.config_for_data`'s).

    Every name, number and path is checked, and the data located, before anything is written
    (`zoo.training.planner.plan`).
    """
    from zoo.training.planner import plan

    return execute(plan(config, data))


def execute(plan) -> TrainResult:
    """Runs a `zoo.training.planner.TrainPlan`: data -> model -> `fit` -> evaluate -> export. The plan was
    checked when it was made; nothing here checks it again."""
    config, data, info = plan.config, plan.data, plan.info
    backend = plan.backend
    # The thread pool and the strategy first: both must be set before anything initializes the backend.
    thread_pools.set_intra_op_threads(config.intra_op_threads)
    strategy = distribute.strategy(config.strategy)
    if config.seed is not None:
        keras.utils.set_random_seed(config.seed)
    if config.deterministic:
        backends.determinism(config.seed is not None)  # fixed op order and algorithms: bitwise identical runs
    is_chief = distribute.is_chief(strategy)

    def splits():
        train, val, test = load_splits(config, data)
        return (distribute.feed(strategy, train, training=True), distribute.feed(strategy, val, training=False),
                distribute.feed(strategy, test, training=False))

    def stream(skip):
        return distribute.feed(strategy, load_train(config, data, stream_from=skip), training=True)

    train_ds, val_ds, test_ds = splits()
    steps_per_epoch = batches.steps_per_epoch(train_ds)
    if steps_per_epoch == 0:
        raise ValueError(f"The train split of {data.name!r} is empty.")
    exact_resume = steps_per_epoch is not None
    if steps_per_epoch is None:  # unknown cardinality
        n = data.size("train")
        steps_per_epoch = math.ceil(n / config.batch_size) if n else None

    run = RunDir(config.run_dir)
    run_dir = run.path
    if is_chief:
        run.create().record(_record(config, strategy, data))
    with distribute.activated(strategy):
        with strategy.scope():
            model = build_and_compile(config, info.input_shape, info.output_units, steps_per_epoch, data=data)

        if config.sanity_check:
            from zoo.training import checks

            report = checks.overfit_batch(model, batches.first_batch(train_ds))
            if not report.passed:
                raise ZooError(f"Sanity check failed: {report}")
            print(f"sanity check: {report}")

        task = get_task(plan.task)
        # Your own data: early stopping and the best checkpoint follow the loss (`DataSource.follows_loss`).
        name, mode = ("loss", "min") if data.follows_loss and config.target is None else (task.monitor, task.mode)
        monitor = f"val_{name}" if val_ds is not None else name
        clock = WallClock(monitor=monitor, target=config.target, mode=mode)
        guard = NonFiniteGuard(steps_per_epoch)
        backup = ResumableBackup(run.backup, steps_per_epoch, config.backup_every if exact_resume else None,
                                 write=is_chief, guard=guard)
        resumed = backup.restore(model)
        guard.step_offset = backup.global_step
        callbacks = [
            guard,
            backup,
            *standard_callbacks(run, monitor=monitor, mode=mode, early_stopping=config.early_stopping,
                                time_limit=config.time_limit, write_files=is_chief),
            *_feature_callbacks(model),
            clock,
        ]
        verbose = default_verbose() if config.verbose is None else config.verbose
        fit = functools.partial(model.fit, validation_data=val_ds, callbacks=callbacks, verbose=verbose,
                                shuffle=False)
        multi = distribute.is_multi_worker(strategy)
        try:
            history = _fit_from(fit, train_ds, stream, config, steps_per_epoch if exact_resume else None,
                                backup.epoch, backup.step_in_epoch, multi_worker=multi and backend == "tensorflow")
        except Exception as e:
            if not multi:
                raise
            dead = multi_worker.dead_worker(e) if backend == "tensorflow" else multi_worker.await_jax_verdict(e)
            if dead is None:
                raise
            last = f"{backup.path} (after step {backup.last_saved_step})" if backup.last_saved_step else "none yet"
            raise ZooError(f"multi_worker: {dead} stopped during training, so this worker stopped too. Last backup: "
                           f"{last}; re-running the same command on every worker resumes from it.") from None

        if guard.bad_step is not None:
            last = (f"{backup.path} (saved after step {backup.last_saved_step}; kept, re-running the same command "
                    f"resumes from it)" if backup.last_saved_step else "none (no step was saved before it)")
            raise NonFiniteLossError(
                f"The training loss became NaN/Inf at step {guard.bad_step} ({guard.bad_where}); training stopped. "
                f"Last good checkpoint: {last}. Lower the learning rate, clip gradients (--clip-norm) or check the data."
            )
        kept, kept_value, stopped_because = kept_epoch(callbacks)
        for f in getattr(model, "train_features", ()):
            f.after_fit(model)  # e.g. EMA: evaluate and export the averaged weights
        if is_chief:
            with outside_distribution():
                model.save(run.last)
        backup.cleanup()

        test_metrics = model.evaluate(test_ds, return_dict=True, verbose=0) if test_ds is not None else {}
    baseline = baselines.run(config) if config.baseline and is_chief else None
    export_path, notes = None, []
    if config.export_dir and is_chief:
        # Real test (or validation) examples become the version's TF Serving warmup records.
        export_path, note = _publish(model, run.last, config, test_ds if test_ds is not None else val_ds)
        notes += [note] if note else []
    test_metrics = {k: float(v) for k, v in test_metrics.items()}
    preset = save_run_preset(model, config, test_metrics, data) if config.save_preset and is_chief else None
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
        epochs_run=len(history.get("loss", ())),
        kept_epoch=kept,
        kept_value=kept_value,
        stopped_because=stopped_because,
        backend=backend,
        notes=tuple(notes),
    )


def _feature_callbacks(model) -> list:
    return model.feature_callbacks() if hasattr(model, "feature_callbacks") else []


def _record(config: TrainConfig, strategy, data) -> dict:
    """The run folder's record (`RunDir.record`): the config as run (the backend filled in), the data
    (`DataSource.record`: what it is, and how an export reads it again), the backend's versions and devices,
    the strategy, when it started."""
    return {
        "config": {**dataclasses.asdict(config), "backend": backends.current()},
        "data": data.record(),
        "backend": backends.describe(),
        "strategy": {"name": config.strategy, "replicas": int(strategy.num_replicas_in_sync),
                     "processes": getattr(strategy, "process_count", None) or _tf_workers(strategy)},
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": sys.argv,
    }


def _tf_workers(strategy) -> int:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not distribute.is_multi_worker(strategy):
        return 1
    return sum(len(tasks) for tasks in resolver.cluster_spec().as_dict().values())


def _publish(model, keras_file: Path, config: TrainConfig, warmup_ds):
    """(the published SavedModel version, None), or (None, why not).

    On TensorFlow the model publishes itself (`zoo.deploy.formats.saved_model.publish_saved_model`). On JAX and PyTorch a
    child process on the TensorFlow backend loads the run's `.keras` file and publishes it, as the
    conversion child of `zoo export` does; without TensorFlow installed there is no SavedModel.
    """
    from zoo.child_process import tensorflow_env
    from zoo.deploy.formats.saved_model import publish_saved_model

    if keras.backend.backend() == "tensorflow":
        return publish_saved_model(model, config.export_dir, config.model, warmup_data=warmup_ds), None
    if not backends.tensorflow_available():
        return None, (f"no SavedModel in {config.export_dir}: it is written by TensorFlow, which is not installed "
                      f"here. {keras_file} exports to ONNX, OpenVINO and .pt2 here (`zoo export {keras_file} "
                      "--formats onnx,openvino,torch`: the torch route), and to every format where it is.")
    with tempfile.TemporaryDirectory(prefix="zoo-publish-") as tmp:
        warmup = None
        if warmup_ds is not None:
            x = batches.first_batch(warmup_ds)[0]
            warmup = os.path.join(tmp, "warmup.npz")
            leaves = keras.tree.flatten(x)
            np.savez(warmup, **{f"x{i}": np.asarray(v)[:10] for i, v in enumerate(leaves)})
        code = ("import sys, numpy as np; from zoo import lean_imports; lean_imports.hold_back(); "
                "import zoo.training.run as r; "
                "r._publish_child(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] or None)")
        env = tensorflow_env()
        done = subprocess.run([sys.executable, "-c", code, str(keras_file), str(config.export_dir), config.model,
                               warmup or ""], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return None, f"no SavedModel: publishing it on the TensorFlow backend failed: {' | '.join(tail)}"
    return Path(done.stdout.strip().splitlines()[-1]), None


def _publish_child(keras_file: str, export_dir: str, name: str, warmup: str | None) -> None:
    """In a TensorFlow-backend child: load the run's `.keras` file and publish it (see `_publish`)."""
    import zoo  # noqa: F401  registers zoo's classes
    import zoo.core.model  # noqa: F401
    from zoo.deploy.formats.saved_model import publish_saved_model

    model = keras.saving.load_model(keras_file, safe_mode=True, compile=False)
    x = None
    if warmup:
        with np.load(warmup) as f:
            leaves = [f[f"x{i}"] for i in range(len(f.files))]
        x = leaves[0] if len(leaves) == 1 else keras.tree.pack_sequence_as(model.input, leaves)
    print(publish_saved_model(model, export_dir, name, warmup_data=x))


def save_run_preset(model, config: TrainConfig, test_metrics: dict, data):
    """The finished run's weights as preset `config.save_preset`, with its recipe, data (`DataSource.record`)
    and test metrics."""
    from zoo.core import presets

    facts = {**data.record(), "backend": backends.current()}
    if config.weights:
        facts["started_from"] = str(config.weights)
    license = config.preset_license or f"unspecified: the weights inherit the terms of the training data ({data.name})"
    return presets.save_preset(
        model, config.save_preset, recipe={**dataclasses.asdict(config), "backend": backends.current()}, data=facts,
        metrics={f"test_{k}": v for k, v in test_metrics.items()}, license=license,
        description=config.description or f"{config.model} trained on {data.name} ({config.recipe or 'no recipe'})",
    )


def _fit_from(fit, train_ds, stream, config: TrainConfig, steps_per_epoch: int | None, epoch: int,
              step_in_epoch: int, multi_worker: bool = False) -> dict:
    """Runs `fit` from (epoch, step_in_epoch) to `config.epochs`; returns the merged history.

    With a known epoch length `fit` is fed the train split's stream (`stream(skip)`: the endless stream
    from global batch `skip`, `zoo.data.batches`): epoch e's order is drawn from (seed, e) alone, and a
    resumed run's stream starts past the batches already trained on, so it sees exactly the batches an
    uninterrupted run would. A run killed mid-epoch first finishes that epoch (a `fit` of the remaining
    steps), then runs the rest. The stream is stateless because Keras may iterate what it is given more
    than once (TensorFlow's `fit` under a `tf.distribute` strategy takes a first batch to build the model,
    then iterates again), and a `shuffle(reshuffle_each_iteration=True)` gives every new iteration the next
    order. With an unknown length `fit` is fed `train_ds` (one epoch) and the run resumes at epoch granularity.
    """
    if epoch >= config.epochs:
        return {}
    if steps_per_epoch is None:  # unknown length: resume at epoch granularity
        return fit(train_ds, initial_epoch=epoch, epochs=config.epochs).history

    def fed(skip):
        ds = stream(skip)
        if multi_worker:  # TensorFlow's
            import tensorflow as tf

            # Every worker builds the same stream; each takes its replicas' share of every global batch.
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
            ds = ds.with_options(options)
        return ds

    done = epoch * steps_per_epoch + step_in_epoch
    histories = []
    if step_in_epoch:
        histories.append(fit(fed(done), initial_epoch=epoch, epochs=epoch + 1,
                             steps_per_epoch=steps_per_epoch - step_in_epoch).history)
        epoch, done = epoch + 1, (epoch + 1) * steps_per_epoch
    if epoch < config.epochs:
        histories.append(fit(fed(done), initial_epoch=epoch, epochs=config.epochs,
                             steps_per_epoch=steps_per_epoch).history)
    merged: dict = {}
    for h in histories:
        for k, v in h.items():
            merged.setdefault(k, []).extend(v)
    return merged
