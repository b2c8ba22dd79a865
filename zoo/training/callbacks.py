"""The callbacks a training run gets, and a wall-clock timer."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import sys
import time
from pathlib import Path

import keras
import numpy as np

from zoo.errors import ZooError
from zoo.fileio import atomic_write
from zoo.run_dir import RunDir


class WallClock(keras.callbacks.Callback):
    """Measures `fit`'s wall time and when a validation metric first reaches a target.

    Attributes after `fit`: `train_time_s`, `time_to_target_s` (None if never
    reached) and `epoch_times_s` (cumulative, per epoch end).
    """

    def __init__(self, monitor: str = "val_accuracy", target: float | None = None, mode: str = "max"):
        super().__init__()
        self.monitor, self.target, self.mode = monitor, target, mode
        self.train_time_s = 0.0
        self.time_to_target_s = None
        self.epoch_times_s: list[float] = []

    def on_train_begin(self, logs=None):
        # Continues across several `fit` calls (a resumed run finishes its partial epoch first).
        self._start = time.perf_counter() - self.train_time_s

    def on_epoch_end(self, epoch, logs=None):
        elapsed = time.perf_counter() - self._start
        self.epoch_times_s.append(elapsed)
        value = (logs or {}).get(self.monitor)
        if self.target is None or self.time_to_target_s is not None or value is None:
            return
        if (value >= self.target) if self.mode == "max" else (value <= self.target):
            self.time_to_target_s = elapsed

    def on_train_end(self, logs=None):
        self.train_time_s = time.perf_counter() - self._start


class TimeLimit(keras.callbacks.Callback):
    """Stops training at the end of an epoch when the next one would end past `seconds` of training.

    The next epoch is expected to take as long as the slowest so far. `stopped_after` is the epoch
    (1-based) it stopped after, or None.
    """

    def __init__(self, seconds: float):
        super().__init__()
        if not seconds > 0:
            raise ValueError(f"seconds must be > 0. Received: seconds={seconds}")
        self.seconds = float(seconds)
        self.stopped_after: int | None = None

    def on_train_begin(self, logs=None):
        self._start = self._epoch_start = time.perf_counter()
        self._slowest = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        self._slowest = max(self._slowest, now - self._epoch_start)
        if now - self._start + self._slowest > self.seconds:
            self.stopped_after = epoch + 1
            self.model.stop_training = True


class SaveBestAtEnd(keras.callbacks.Callback):
    """Saves the model at the end of training, after `stopper` (an `EarlyStopping` that restores its best
    weights, listed before this callback) has restored them: the best checkpoint, written once."""

    def __init__(self, path: str, stopper: keras.callbacks.EarlyStopping):
        super().__init__()
        self.path, self.stopper = path, stopper

    def on_train_end(self, logs=None):
        if self.stopper.best_weights is not None:
            with outside_distribution():  # the chief of a multi-process run saves alone
                self.model.save(self.path)


class StepCounter:
    """Training steps done since the previous batch callback of this epoch.

    With `steps_per_execution=k`, Keras runs k steps per call of the train function and calls the
    batch callbacks once per call, with the index of the call's last step; counting callbacks would
    count one step where k were taken. Keras reports `begin + k - 1` for a shorter last call of an
    epoch too, so the index is capped at the epoch's length (`steps`, from the callback's params).
    """

    def __init__(self):
        self.last = -1

    def reset(self):
        self.last = -1

    def advance(self, batch: int, steps: int | None = None) -> int:
        if steps:
            batch = min(batch, steps - 1)
        done, self.last = batch - self.last, batch
        return max(done, 1)


class NonFiniteLossError(ZooError, FloatingPointError):
    """Training produced a NaN or Inf loss; the message names the step and the last good checkpoint."""


class NonFiniteGuard(keras.callbacks.Callback):
    """Stops training at the first step whose loss is NaN or Inf and remembers which step it was.

    Put it before `ResumableBackup` in the callback list: the backup then never
    overwrites the last good checkpoint with the broken state.
    """

    def __init__(self, steps_per_epoch: int | None = None):
        super().__init__()
        self.steps_per_epoch = steps_per_epoch
        self.bad_step: int | None = None  # 1-based global step
        self.bad_where = ""
        self._epoch = 0
        self._global_step = 0
        self._steps = StepCounter()
        self.step_offset = 0  # set by the run for a resumed run

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._steps.reset()

    def on_train_batch_end(self, batch, logs=None):
        self._global_step += self._steps.advance(batch, self.params.get("steps"))
        loss = (logs or {}).get("loss")
        if self.bad_step is None and loss is not None and not math.isfinite(float(loss)):
            self.bad_step = self.step_offset + self._global_step
            self.bad_where = f"epoch {self._epoch + 1}, batch {batch + 1}"
            self.model.stop_training = True


class ResumableBackup(keras.callbacks.Callback):
    """Saves the whole training state every `save_every` steps and at each epoch end; restores it.

    The state is every variable of `model.training_state_variables()` (weights,
    the random layers' seed states, optimizer slots and iteration count, hence
    the learning-rate schedule, train_step feature state), the state of Keras'
    global seed generator where something drew from it, and the epoch and the
    step within it, written to `state.npz` atomically (`zoo.fileio.atomic_write`),
    so a SIGKILL at any moment leaves the previous state intact.
    Unlike Keras' `BackupAndRestore` it records the position inside an epoch, so
    a run killed mid-epoch continues from the next batch (see `zoo.training.run`).
    The input pipeline keeps no random state to save: the stream's order is
    drawn from (seed, epoch) and its augmentations from (seed, global batch)
    (`zoo.data.batches`, `zoo.training.augment`), so the position is its state.
    With `write=False` (a non-chief multi-worker task) it only restores.
    """

    FILE = "state.npz"

    def __init__(self, backup_dir, steps_per_epoch: int | None, save_every: int | None = 100, write: bool = True,
                 guard: NonFiniteGuard | None = None):
        super().__init__()
        self.backup_dir = Path(backup_dir)
        self.steps_per_epoch = steps_per_epoch
        self.save_every = save_every
        self.write = write
        self.guard = guard
        self.epoch = 0
        self.step_in_epoch = 0
        self.global_step = 0
        self.last_saved_step: int | None = None
        self.finished = False
        self._steps = StepCounter()

    @property
    def path(self) -> Path:
        return self.backup_dir / self.FILE

    @staticmethod
    def _state_variables(model):
        if hasattr(model, "training_state_variables"):
            return model.training_state_variables()
        return [*model.variables, *model.optimizer.variables]  # `variables`: the weights and the seed states

    GLOBAL_SEED = "global_seed"  # the npz entry of Keras' global seed generator's state

    @staticmethod
    def _global_seed_generator(create: bool = False):
        """The generator `keras.random` draws from when given no seed (None until something did)."""
        from keras.src.random import seed_generator

        if create:
            return seed_generator.global_seed_generator()
        return seed_generator.global_state.get_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR)

    def restore(self, model) -> dict | None:
        """Loads the saved state into `model` (built and compiled); returns the position, or None."""
        if not self.path.is_file():
            return None
        with np.load(self.path) as data:
            meta = json.loads(str(data["meta"]))
            values = [data[f"v{i}"] for i in range(meta["count"])]
            global_seed = data[self.GLOBAL_SEED] if self.GLOBAL_SEED in data.files else None
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None and not optimizer.built:  # Keras builds it at the first step otherwise
            optimizer.build(model.trainable_variables)
        variables = self._state_variables(model)
        shapes = [tuple(v.shape) for v in variables]
        if len(values) != len(variables) or any(tuple(a.shape) != s for a, s in zip(values, shapes)):
            raise ZooError(
                f"The backup {str(self.path)!r} was written by a different model or training setup "
                f"({len(values)} saved variables, this run has {len(variables)}). Delete it to start over."
            )
        for v, a in zip(variables, values):
            v.assign(a)
        if global_seed is not None:
            self._global_seed_generator(create=True).state.assign(global_seed)
        self.epoch, self.step_in_epoch, self.global_step = meta["epoch"], meta["step_in_epoch"], meta["global_step"]
        self.last_saved_step = self.global_step
        return meta

    def save(self):
        if not self.write:
            return
        values = [np.asarray(keras.ops.convert_to_numpy(v)) for v in self._state_variables(self.model)]
        if not all(np.isfinite(a).all() for a in values if a.dtype.kind == "f"):
            return  # never replace a good checkpoint with a broken state
        meta = {"epoch": self.epoch, "step_in_epoch": self.step_in_epoch, "global_step": self.global_step,
                "count": len(values)}
        generator = self._global_seed_generator()
        extra = {} if generator is None else {self.GLOBAL_SEED: np.asarray(keras.ops.convert_to_numpy(generator.state))}
        self.backup_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, lambda f: np.savez(f, meta=json.dumps(meta), **{f"v{i}": a for i, a in enumerate(values)},
                                                   **extra))
        self.last_saved_step = self.global_step

    def _tripped(self) -> bool:
        return self.guard is not None and self.guard.bad_step is not None

    def on_epoch_begin(self, epoch, logs=None):
        self._steps.reset()

    def on_train_batch_end(self, batch, logs=None):
        if self._tripped():
            return
        done = self._steps.advance(batch, self.params.get("steps"))
        self.global_step += done
        self.step_in_epoch += done
        if self.save_every and self.global_step // self.save_every > (self.global_step - done) // self.save_every:
            self.save()

    def on_epoch_end(self, epoch, logs=None):
        if self._tripped():
            return
        self.epoch, self.step_in_epoch = epoch + 1, 0
        self.save()

    def cleanup(self):
        """Removes the backup after a finished run (nothing left to resume)."""
        if self.write and self.backup_dir.exists():
            shutil.rmtree(self.backup_dir)


@contextlib.contextmanager
def outside_distribution():
    """No `keras.distribution` while the chief alone writes a model file.

    Keras' saving creates variables (an optimizer's, to list the attributes to skip), and under a
    multi-process JAX distribution every process must create a variable together: the chief saving
    alone would wait for the others, or desynchronize them. Outside it the variables are local.
    """
    if keras.backend.backend() != "jax" or keras.distribution.distribution() is None:
        yield
        return
    previous = keras.distribution.distribution()
    keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(previous)


class ModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Keras' `ModelCheckpoint`, saving `outside_distribution` (the chief of a multi-process run saves alone)."""

    def on_train_batch_end(self, batch, logs=None):
        with outside_distribution():
            super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        with outside_distribution():
            super().on_epoch_end(epoch, logs)


def standard_callbacks(
    run: RunDir,
    *,
    monitor: str,
    mode: str = "max",
    early_stopping: int | None = None,
    time_limit: float | None = None,
    write_files: bool = True,
) -> list[keras.callbacks.Callback]:
    """Best-weights checkpoint, TensorBoard (where TensorFlow is installed), CSV history, optional early
    stopping and time limit.

    `run` (a `zoo.run_dir.RunDir`) gets the best model, TensorBoard's logs and the CSV history (the
    resumable backup is `ResumableBackup`'s, added by the run). With
    `write_files=False` (a non-chief multi-worker task) only the in-memory
    callbacks are returned.
    """
    from zoo.training import backends

    callbacks: list[keras.callbacks.Callback] = []
    stopper = None
    if early_stopping:
        stopper = keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=early_stopping,
                                                restore_best_weights=True)
    if write_files:
        # With early stopping the best weights are held in memory and restored at the end: the best model is
        # written once then, not at every better epoch (a .keras save is ~0.1-1 s, many times a small
        # table's epoch).
        best = str(run.best)
        callbacks.append(ModelCheckpoint(best, monitor=monitor, mode=mode, save_best_only=True) if stopper is None
                         else SaveBestAtEnd(best, stopper))
        if backends.tensorflow_available():  # Keras writes TensorBoard's event files with tf.summary
            callbacks.append(keras.callbacks.TensorBoard(str(run.logs)))
        callbacks.append(keras.callbacks.CSVLogger(str(run.history), append=True))
    if stopper is not None:
        callbacks.insert(0, stopper)  # first: its on_train_end restores the best weights before they are saved
    if time_limit:
        callbacks.append(TimeLimit(time_limit))
    return callbacks


def kept_epoch(callbacks) -> tuple[int | None, str, str]:
    """``(epoch, best, why)``: the 1-based epoch whose weights early stopping restored (None without early
    stopping), its monitored value (e.g. ``"val_loss 0.1234"``), and why training ended."""
    stopper = next((c for c in callbacks if isinstance(c, keras.callbacks.EarlyStopping)), None)
    limit = next((c for c in callbacks if isinstance(c, TimeLimit)), None)
    if limit is not None and limit.stopped_after is not None:
        why = f"time limit {limit.seconds:g} s reached after epoch {limit.stopped_after}"
    elif stopper is not None and stopper.stopped_epoch:
        why = f"early stopping: {stopper.patience} epochs without a better {stopper.monitor}"
    else:
        why = "the last epoch"
    if stopper is None or stopper.best_weights is None:
        return None, "", why
    return stopper.best_epoch + 1, f"{stopper.monitor} {float(stopper.best):.4f}", why


def default_verbose() -> int:
    """Keras' progress bar on a terminal, one line per epoch in logs and CI."""
    return 1 if sys.stdout.isatty() else 2
