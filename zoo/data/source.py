"""`DataSource`: what a training run asks of its data, answered alike by a registered dataset and your own paths.

A run trains on either a registered (or TFDS) dataset, `zoo.data.load`, or your own data at a path,
`zoo.data.from_path`, which returns a `zoo.data.PathData`. Training asks both the same questions, so it
asks one object (Keras's `fit` does the same with its one data-adapter dispatch):

- `info()`: the input shape, the classes or output units, the split sizes (`zoo.data.DatasetInfo`);
- `task`: what the data is learnt for (None: the architecture's, as for a registered dataset);
- `batches(role, ...)`: the batched ``(x, y)`` of a role, ``"train"``, ``"validation"`` or ``"test"``;
- `raw_input`: the fitted preprocessing the model builds in front of the architecture, so that it takes
  the data as stored (`zoo.data.raw_input`; None where the batches are the architecture's input already);
- `record()`: what the run folder records of the data (`zoo.run_dir.RunDir.record`);
- `export_data()`: how an export reads the same data for its test, calibration and validation roles, as the
  keyword arguments of `zoo.deploy.export.ExportData.from_dataset(name, ...)` (``"dataset"``: the name) or
  `ExportData.from_path(path, model, ...)` (``"path"``). A plain dict: the data layer sits below export.

`RegisteredData` is the registered dataset's side; `zoo.data.PathData` is your own data's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Protocol, runtime_checkable

ROLES = ("train", "validation", "test")


@runtime_checkable
class DataSource(Protocol):
    """What a training run asks of its data (see the module docstring)."""

    @property
    def name(self) -> str:
        """How messages name the data: a dataset name, or the path read."""

    @property
    def task(self) -> Optional[str]:
        """"classification", "regression" or "forecast"; None: the architecture's task."""

    @property
    def raw_input(self) -> Any:
        """The fitted preprocessing the model builds in (`zoo.data.raw_input`), or None."""

    @property
    def follows_loss(self) -> bool:
        """Whether early stopping and the best checkpoint follow the loss rather than the task's metric."""

    def info(self):
        """The facts a model needs (`zoo.data.DatasetInfo`), without reading the examples."""

    def has(self, role: str) -> bool:
        """Whether the data has a split for `role` (one of `ROLES`)."""

    def size(self, role: str) -> Optional[int]:
        """The examples of `role`'s split, or None where unknown."""

    def batches(self, role: str, **batching):
        """The batched ``(x, y)`` of `role`'s split; `batching`: `zoo.data.Batching`'s fields."""

    def backends(self) -> tuple:
        """The Keras backends a model of this data trains on."""

    def explain(self) -> list:
        """Lines for people: what the data is, and each inference made reading it."""

    def record(self) -> dict:
        """What the run folder records of the data (JSON-ready)."""

    def export_data(self) -> dict:
        """How an export reads this data again (see the module docstring)."""


@dataclasses.dataclass(frozen=True)
class RegisteredData:
    """A registered or TFDS dataset as a `DataSource`: `zoo.data.load` of the split each role names.

    `splits` maps a role to its split spec (``{"train": "train[:90%]", "validation": "train[90%:]", "test":
    "test"}``); a role without one (None) has no split.
    """

    dataset: str
    splits: Mapping = dataclasses.field(default_factory=lambda: {"train": "train", "validation": "test",
                                                                 "test": "test"})
    data_dir: Optional[str] = None

    task = None  # the architecture's
    raw_input = None  # the batches are the architecture's input
    follows_loss = False

    @property
    def name(self) -> str:
        return self.dataset

    def info(self):
        from zoo.data.loading import dataset_info

        return dataset_info(self.dataset, data_dir=self.data_dir)

    def _split(self, role: str) -> Optional[str]:
        if role not in ROLES:
            from zoo.errors import UnknownNameError

            raise UnknownNameError("data role", role, ROLES)
        return self.splits.get(role)

    def has(self, role: str) -> bool:
        return self._split(role) is not None

    def size(self, role: str) -> Optional[int]:
        return self.info().splits.get(self._split(role))

    def batches(self, role: str, **batching):
        from zoo.data.loading import load

        return load(self.dataset, self._split(role), data_dir=self.data_dir, **batching)

    def backends(self) -> tuple:
        return ("tensorflow", "jax", "torch")

    def explain(self) -> list:
        splits = ", ".join(f"{role} {self._split(role)!r}" for role in ROLES if self.has(role))
        where = f" in {self.data_dir}" if self.data_dir else ""
        return [f"{'dataset:':<14}{self.dataset} (registered or TFDS{where})", f"{'splits:':<14}{splits}"]

    def record(self) -> dict:
        return {"dataset": self.dataset, "splits": dict(self.splits), "data_dir": self.data_dir,
                "export": self.export_data()}

    def export_data(self) -> dict:
        found = {"dataset": self.dataset, "calibration_split": self._split("train"), "test_split": self._split("test"),
                 "data_dir": self.data_dir}
        return {k: v for k, v in found.items() if v is not None}
