"""The run folder `zoo train` writes, as one object: every file name in it, how its record is written and read.

Ultralytics' trainer owns `save_dir`, `last` and `best`; here `RunDir` does, for training (which writes it),
export and benchmark (which read it back: the model, the data it was trained on, where a benchmark goes) and
the artifacts' resolver (which opens a run folder as its model). No other module spells these names.

    runs/convnet_bn-mnist/
        run.json       the record: the config as run, the backend, the strategy, when it started
        last.keras     the model at the end of training (EMA weights where EMA ran)
        best.keras     the best epoch by the monitored metric
        backup/        the resumable backup (`ResumableBackup`), gone once the run ends well
        logs/          TensorBoard's event files (on TensorFlow)
        history.csv    one row an epoch
        benchmark/     `zoo benchmark RUN`'s artifacts and tables
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from zoo.fileio import atomic_write_text, ensure_dir


@dataclasses.dataclass(frozen=True)
class RunDir:
    """A run folder at `path` (it need not exist yet: `create()` makes it)."""

    path: Path

    RECORD = "run.json"
    LAST = "last.keras"
    BEST = "best.keras"
    MODELS = (LAST, BEST)  # the run's models, in order of preference

    def __post_init__(self):
        path = self.path.path if isinstance(self.path, RunDir) else Path(self.path)  # RunDir(run) is run
        object.__setattr__(self, "path", path)

    @classmethod
    def of(cls, path) -> RunDir | None:
        """The run folder `path` is, or holds a file of (`runs/x`, `runs/x/last.keras`), else None.

        A folder is a run folder when it holds the record or one of the run's models."""
        path = Path(os.fspath(path))
        folder = path if path.is_dir() else path.parent
        if folder.is_dir() and any((folder / name).is_file() for name in (cls.RECORD, *cls.MODELS)):
            return cls(folder)
        return None

    # ------------------------------------------------------------------ the files
    @property
    def record_file(self) -> Path:
        return self.path / self.RECORD

    @property
    def last(self) -> Path:
        return self.path / self.LAST

    @property
    def best(self) -> Path:
        return self.path / self.BEST

    @property
    def backup(self) -> Path:
        return self.path / "backup"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def history(self) -> Path:
        return self.path / "history.csv"

    @property
    def benchmark(self) -> Path:
        return self.path / "benchmark"

    def model_file(self) -> Path | None:
        """The model to open: `last.keras`, else `best.keras` (a run stopped before its end has only that)."""
        return next((p for p in (self.last, self.best) if p.is_file()), None)

    # ------------------------------------------------------------------ the record
    def create(self) -> RunDir:
        ensure_dir(self.path)
        return self

    def record(self, record: dict) -> Path:
        """Writes `run.json` atomically (values JSON cannot hold are written as their `str`)."""
        return atomic_write_text(self.record_file, json.dumps(record, indent=2, default=str) + "\n")

    def read(self) -> dict:
        """The record `record()` wrote; {} where there is none or it cannot be read."""
        try:
            record = json.loads(self.record_file.read_text())
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}

    def config(self) -> dict:
        """The training config the run recorded ({} where none)."""
        return self.read().get("config") or {}
