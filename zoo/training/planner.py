"""`plan`: everything a training run will do, decided and checked before any work; `zoo.training.execute` does it.

    plan = zoo.training.plan("mnist_fast", epochs=1)          # a recipe, and the values you give
    plan = zoo.training.plan(data="photos/", epochs=5)        # your own data: the rest inferred from it
    print(plan.describe())                                    # every setting, and where it came from
    result = zoo.training.execute(plan)                       # = zoo.training.train(...) of the same

The shape is export's (`zoo.deploy.export.planner`): this is the one place where the recipe, the values
given (flags or keywords) and what the data implies meet. It reads the recipe once, chooses the Keras
backend (before anything imports Keras), reads the data once (`zoo.data.source.DataSource`: a registered
dataset, or your own data read by `zoo.data.from_path`), completes the config from the data
(`zoo.training.own_data.infer`) and checks everything once (`TrainConfig.validate`, the baseline's name, the
data's backends). The plan is immutable; `zoo train --dry-run` prints it and stops.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable

from zoo.errors import UnknownNameError, ZooError
from zoo.training import backends
from zoo.training.config import TrainConfig, load_recipe
from zoo.training.knobs import knobs


@dataclasses.dataclass(frozen=True)
class Setting:
    """One knob's value in the plan, and where it came from."""

    name: str
    value: Any
    origin: str  # "recipe NAME", "given (--flag)", "inferred from the data: why", "config" or "default"


@dataclasses.dataclass(frozen=True)
class TrainPlan:
    """What a training run will do (see the module docstring); `zoo.training.execute(plan)` does it."""

    config: TrainConfig  # validated
    data: Any  # a `zoo.data.source.DataSource`
    info: Any  # the data's `zoo.data.DatasetInfo`
    task: str  # the data's, else the architecture's
    backend: str  # the Keras backend chosen (before Keras was imported)
    settings: tuple[Setting, ...]  # every knob, in declaration order
    inferred: tuple[str, ...] = ()  # the data's explanation and each inference, as lines for people
    cpu_replicas: int | None = None  # the CPU split into this many logical devices

    @property
    def run_dir(self) -> Path:
        return self.config.run_dir

    def describe(self) -> str:
        """The plan in words: the data and what was inferred from it, then every setting not at its default."""
        c = self.config
        lines = [f"train {c.model} on {self.data.name} ({self.task}, backend {self.backend}) -> {self.run_dir}"]
        lines += list(self.inferred)
        units = self.info.output_units if self.info.output_units is not None else self.info.num_classes
        lines.append(f"{'model io:':<14}input {tuple(self.info.input_shape)} -> {units} output(s)")
        shown = [s for s in self.settings if s.origin != "default"]
        lines.append(f"settings ({len(shown)} of {len(self.settings)}; the others are TrainConfig's defaults):")
        width = max((len(s.name) for s in shown), default=0)
        for s in shown:
            lines.append(f"  {s.name:<{width}}  {_shown(s.value):<20}  {s.origin}")
        if self.cpu_replicas:
            lines.append(f"  {'cpu_replicas':<{width}}  {self.cpu_replicas:<20}  given (--cpu-replicas)")
        return "\n".join(lines)


def plan(recipe=None, data=None, *, cpu_replicas: int | None = None, **changes) -> TrainPlan:
    """The plan of one training run, after checking everything (see the module docstring). Nothing is written.

    Args:
        recipe: a recipe name (`zoo recipes`), a .toml path (possibly with ``data = "PATH"``), a `TrainConfig`
            taken as the config to run (nothing inferred), or None: with your own data the default of its
            kind, else `zoo.training.config.DEFAULT_RECIPE`.
        data: your own data, a path (`zoo.data.from_path` reads it) or a `zoo.data.source.DataSource` already
            read; None: the recipe's ``data``, else the config's registered `dataset`.
        cpu_replicas: split the CPU into this many logical devices, before the backend starts.
        changes: `TrainConfig` values given (flags): they override the recipe and every inference.
    """
    from zoo.training.config import DEFAULT_RECIPE

    fields = {k.name for k in knobs(TrainConfig)}
    for name in changes:
        if name not in fields:
            raise UnknownNameError("TrainConfig setting", name, sorted(fields))
    complete = isinstance(recipe, TrainConfig)  # a config as run: nothing is inferred
    base = recipe if complete else (load_recipe(os.fspath(recipe)) if recipe is not None else None)  # the one read
    given_path = changes.pop("data", None)
    data = data if data is not None else given_path or (base.data if base is not None else None)
    if data is not None and "dataset" in changes:
        raise ValueError("Give either --data PATH (your own data) or --dataset NAME, not both.")
    if data is None and base is None:
        base = load_recipe(DEFAULT_RECIPE)
    chosen = changes.get("backend", base.backend if base is not None else None)
    backend = backends.use(chosen)  # before anything imports Keras: the data's reader may
    if cpu_replicas:
        from zoo.training import distribute

        distribute.split_cpu(cpu_replicas)  # before the backend initializes its devices
    given = dict(changes)
    inferred: dict = {}
    lines: list[str] = []
    if data is None:
        from zoo.training.builders import data_source

        config = _with(base, given)
        source = data_source(config)
        lines += source.explain()
    else:
        from zoo.data.source import DataSource
        from zoo.training import own_data

        already_read = isinstance(data, DataSource)
        if not (base is not None and data == base.data):  # the path given, or the one the data was read from
            given["data"] = str(data.name if already_read else data)
        # The data knobs shape the reading: the recipe's, with the values given on top.
        config = _with(base or TrainConfig(), given)
        source = data if already_read else own_data.read(config)  # the one read of the data
        lines += source.explain()
        if not complete:
            config, inferred = own_data.infer(base, given, source)
            lines += [i.line() for i in inferred.values()]
    task = _check(config, source, backend)
    return TrainPlan(config=config, data=source, info=source.info(), task=task, backend=backend,
                     settings=_settings(config, given, inferred, recipe_given=recipe is not None),
                     inferred=tuple(lines), cpu_replicas=cpu_replicas)


def _with(base: TrainConfig, given: dict) -> TrainConfig:
    """`base` with the values given; a recipe's model overrides are dropped for another model (they were for its
    own), and those given go on top."""
    overrides = {} if given.get("model", base.model) != base.model else dict(base.model_overrides)
    overrides.update(given.get("model_overrides", {}))
    return base.replace(**{**given, "model_overrides": overrides})


def _check(config: TrainConfig, data, backend: str) -> str:
    """Every check of the run, once; returns the task it trains."""
    config.validate()
    if config.baseline:
        from zoo.training import baselines

        baselines.get(config.baseline)
    if backend not in data.backends():
        raise ZooError(f"{data.name}: this data trains on the {' or '.join(data.backends())} backend only, not "
                       f"{backend}: its model takes strings ({data.raw_input.describe()}), and strings flow through "
                       f"TensorFlow tensors only. Use --backend tensorflow.")
    if config.qat_from and data.raw_input is not None:
        raise ZooError("--qat-from starts from a model trained on a registered --dataset; with your own --data, "
                       "train with --qat from the start (or pass --dataset).")
    from zoo.architectures import catalog  # the recorded facts: the family modules import Keras

    return data.task or catalog.model_info(config.model).task


def _settings(config: TrainConfig, given: dict, inferred: dict, recipe_given: bool) -> tuple[Setting, ...]:
    """Every knob's value and where it came from: inferred from the data, given, the recipe's, or the default."""
    defaults = TrainConfig()
    out = []
    for k in knobs(TrainConfig):
        value = getattr(config, k.name)
        if k.name in inferred:
            origin = f"inferred from the data: {inferred[k.name].reason}"
        elif k.name in given or (k.name == "recipe" and recipe_given):
            origin = f"given ({k.cli_flag if k.cli else '--' + k.name.replace('_', '-')})"
        elif k.name == "recipe":
            origin = "the default recipe"
        elif value != getattr(defaults, k.name):
            origin = f"recipe {config.recipe}" if config.recipe else "config"
        else:
            origin = "default"
        out.append(Setting(k.name, value, origin))
    for key, found in inferred.items():
        if key.startswith("model_overrides."):
            out.append(Setting(key, found.value, f"inferred from the data: {found.reason}"))
    return tuple(out)


def _shown(value) -> str:
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value)) or "-"
    return str(value)


def config_for_data(data_path=None, recipe: str | None = None, log: Callable[[str], None] = print,
                    **changes) -> tuple[TrainConfig, Any]:
    """The config `zoo train --data` runs, and the data read for it (a `zoo.data.PathData`): `plan`'s, whose
    `TrainPlan` holds both (and every inference, printed here through `log`), for callers that change the
    config or build the model themselves before training.

    `recipe`: a recipe (name or .toml, possibly with ``data = "..."``) or None for the default of
    the data's kind. `changes`: the values the user gave (flags); they override everything.
    """
    planned = plan(recipe, data_path, **changes) if data_path or recipe else None
    if planned is None or not planned.config.data:
        raise ValueError("No data: give a path with --data (or `data = \"PATH\"` in the recipe).")
    for line in planned.inferred:
        log(line)
    return planned.config, planned.data
