"""`zoo train`: run a recipe, with flags overriding its values."""

from __future__ import annotations

import json
import os
import sys

from zoo.cli.common import positive_int as _positive_int


def add(sub):
    # Light imports only: the knob declarations import no TensorFlow.
    from zoo.core.options import add_arguments
    from zoo.training.config import DEFAULT_RECIPE, TrainConfig
    from zoo.training.knobs import RUN_GROUP, knobs

    p = sub.add_parser(
        "train",
        help="train a registry model with model.fit, evaluate, export a SavedModel; on a dataset or your own data",
        description=f"Runs a recipe (default {DEFAULT_RECIPE!r}; with --data PATH, the default for the data's kind); "
                    "each flag given overrides the recipe's value. Defaults shown are TrainConfig's, used where the "
                    "recipe does not set the key.",
    )
    p.add_argument("--recipe", default=None,
                   help=f"recipe name (see `zoo recipes`) or a .toml path (default {DEFAULT_RECIPE!r}, or with --data "
                        "the default for the data's kind)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="model override, e.g. --set width=256 --set 'filters=[16,32]' (values parsed as JSON)")
    p.add_argument("--cpu-replicas", type=_positive_int, default=None,
                   help="split the CPU into N logical devices (for --strategy mirrored, or data_parallel on JAX, "
                        "without GPUs)")
    groups = add_arguments(p, knobs(TrainConfig))
    groups[RUN_GROUP].add_argument("--workers", type=_positive_int, metavar="N",
                                   help="launch N local workers (127.0.0.1, free ports) with --strategy multi_worker "
                                        "(TensorFlow: TF_CONFIG; JAX: jax.distributed)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (every setting, and whether the recipe, a flag or the data set it) and stop: "
                        "nothing is trained or written")
    p.set_defaults(func=_cmd_train)


def _parse_overrides(items):
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def plan_from_args(args, cpu_replicas: int | None = None):
    """The `zoo.training.TrainPlan` of the command line: the recipe named by --recipe (or the default), every
    flag the user gave on top, and with your own data (--data, or `data` in the recipe) the rest inferred."""
    from zoo.core.options import given_values
    from zoo.training.config import TrainConfig
    from zoo.training.knobs import knobs
    from zoo.training.planner import plan

    changes = given_values(args, knobs(TrainConfig))
    changes.pop("recipe", None)  # --recipe is a knob too: given once, as the recipe
    if args.set:
        changes["model_overrides"] = _parse_overrides(args.set)
    return plan(args.recipe, changes.pop("data", None), cpu_replicas=cpu_replicas, **changes)


def train_config_from_args(args, log=print):
    """The config `plan_from_args` plans; with your own data ``(config, data read)``, each inference printed
    through `log` (`zoo.training.own_data`)."""
    planned = plan_from_args(args)
    if not planned.config.data:
        return planned.config
    for line in planned.inferred:
        log(line)
    return planned.config, planned.data


def _strip_workers(argv):
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
        elif item == "--workers":
            skip = True
        elif not item.startswith("--workers="):
            out.append(item)
    return out


def _cmd_train(args) -> int:
    from zoo.training import multi_worker

    launched = "TF_CONFIG" in os.environ or any(name in os.environ for name in multi_worker.JAX_ENV)
    launching = bool(args.workers and args.workers > 1 and not launched)
    # The recipe read, the backend chosen, the data read and everything checked, once, before any work.
    planned = plan_from_args(args, cpu_replicas=None if launching else args.cpu_replicas)
    print(planned.describe())
    if args.dry_run:
        return 0
    if launching:
        argv = _strip_workers(getattr(args, "argv", None) or sys.argv[1:])
        if argv and argv[0] == "train":
            argv = argv[1:]
        if "--strategy" in argv:
            i = argv.index("--strategy")
            del argv[i:i + 2]
        return multi_worker.launch(argv, args.workers, backend=planned.backend)
    from zoo.training.run import execute

    config = planned.config
    result = execute(planned)
    print()
    print(f"recipe:               {config.recipe or '-'} ({config.model} on {planned.data.name})")
    print(f"run directory:        {result.run_dir}")
    if result.resumed_from:
        r = result.resumed_from
        print(f"resumed from:         epoch {r['epoch'] + 1}, step {r['step_in_epoch']} (global step {r['global_step']})")
    if result.weights_report is not None:
        print(f"started from:         {result.weights_report}")
    if result.export_path:
        print(f"export path:          {result.export_path}")
    for key, value in result.test_metrics.items():
        label = f"test {key}:"
        print(f"{label:<22}{value:.4f}" if key != "accuracy" else f"{label:<22}{value:.4f} ({value:.2%})")
    if result.baseline:
        b = result.baseline
        print(f"baseline {b['name']}: test {b['metric']} {b['value']:.4f}")
    if result.preset is not None:
        print(f"preset:               {result.preset.name} ({result.preset.path})")
    if result.epochs_run:
        kept = f", kept epoch {result.kept_epoch} (best {result.kept_value})" if result.kept_epoch else ""
        print(f"epochs:               {result.epochs_run} run{kept}; stopped by {result.stopped_because}")
    print(f"backend:              {result.backend}")
    for note in result.notes:
        print(f"note:                 {note}")
    print(f"training wall time:   {result.train_time_s:.1f} s")
    if config.target is not None:
        reached = f"{result.time_to_target_s:.1f} s" if result.time_to_target_s is not None else "not reached"
        print(f"time to target {config.target:g}: {reached}")
    return 0
