"""The callbacks a training run gets, and a wall-clock timer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import keras


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
        self._start = time.perf_counter()

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


def standard_callbacks(
    run_dir: Path,
    *,
    monitor: str,
    mode: str = "max",
    early_stopping: int | None = None,
    write_files: bool = True,
) -> list[keras.callbacks.Callback]:
    """Best-weights checkpoint, BackupAndRestore, TensorBoard, CSV history, optional early stopping.

    `run_dir` gets `best.keras`, `backup/` (re-running the same command after an
    interruption resumes from it), `logs/` and `history.csv`. With
    `write_files=False` (a non-chief multi-worker task) only the in-memory
    callbacks are returned, plus BackupAndRestore which every worker needs.
    """
    callbacks: list[keras.callbacks.Callback] = [keras.callbacks.BackupAndRestore(str(run_dir / "backup"))]
    if write_files:
        callbacks += [
            keras.callbacks.ModelCheckpoint(str(run_dir / "best.keras"), monitor=monitor, mode=mode, save_best_only=True),
            keras.callbacks.TensorBoard(str(run_dir / "logs")),
            keras.callbacks.CSVLogger(str(run_dir / "history.csv"), append=True),
        ]
    if early_stopping:
        callbacks.append(
            keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=early_stopping, restore_best_weights=True)
        )
    return callbacks


def default_verbose() -> int:
    """Keras' progress bar on a terminal, one line per epoch in logs and CI."""
    return 1 if sys.stdout.isatty() else 2
