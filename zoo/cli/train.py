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


def train_config_from_args(args, log=print):
    """The recipe named by --recipe, with every flag the user gave applied on top.

    With your own data (--data, or `data` in the recipe) returns ``(config, data read)``: the
    recipe and whatever else was not given are inferred from the data (`zoo.training.own_data`).
    """
    from zoo.core.options import given_values
    from zoo.training.config import DEFAULT_RECIPE, TrainConfig, load_recipe
    from zoo.training.knobs import knobs

    changes = given_values(args, knobs(TrainConfig))
    recipe_data = bool(args.recipe and args.recipe.endswith(".toml") and load_recipe(args.recipe).data)
    if changes.get("data") or recipe_data:
        if "dataset" in changes:
            raise ValueError("Give either --data PATH (your own data) or --dataset NAME, not both.")
        from zoo.training.own_data import config_for_data

        if args.set:
            changes["model_overrides"] = _parse_overrides(args.set)
        changes.pop("recipe", None)  # --recipe is a knob too: given once, as the recipe
        return config_for_data(changes.pop("data", None), recipe=args.recipe, log=log, **changes)
    config = load_recipe(args.recipe or DEFAULT_RECIPE)
    if "model" in changes and changes["model"] != config.model:
        config.model_overrides = {}  # the recipe's overrides were for its own model
    if args.set:
        changes["model_overrides"] = {**config.model_overrides, **_parse_overrides(args.set)}
    return config.replace(**changes)


def _split(result):
    """(config, data read or None) from `train_config_from_args`."""
    return result if isinstance(result, tuple) else (result, None)


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


def _backend(args) -> str | None:
    """The backend the flags or the recipe ask for (None: $KERAS_BACKEND's, else TensorFlow)."""
    if args.backend is not None:
        return args.backend
    if args.recipe:
        from zoo.training.config import load_recipe

        return load_recipe(args.recipe).backend
    return None


def _cmd_train(args) -> int:
    from zoo.training import backends, multi_worker

    backend = backends.use(_backend(args))  # before anything imports Keras
    launched = "TF_CONFIG" in os.environ or any(name in os.environ for name in multi_worker.JAX_ENV)
    if args.workers and args.workers > 1 and not launched:
        argv = _strip_workers(getattr(args, "argv", None) or sys.argv[1:])
        if argv and argv[0] == "train":
            argv = argv[1:]
        if "--strategy" in argv:
            i = argv.index("--strategy")
            del argv[i:i + 2]
        _split(train_config_from_args(args))[0].validate()  # bad input fails here, before any worker starts
        return multi_worker.launch(argv, args.workers, backend=backend)
    if args.cpu_replicas:
        from zoo.training import distribute

        distribute.split_cpu(args.cpu_replicas)
    from zoo.training.run import train

    config, data = _split(train_config_from_args(args))
    result = train(config, data=data)
    print()
    print(f"recipe:               {config.recipe or '-'} ({config.model} on {config.data or config.dataset})")
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
