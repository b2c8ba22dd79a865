"""`zoo train`: run a recipe, with flags overriding its values."""

from __future__ import annotations

import json
import os
import sys

from zoo.cli.common import positive_int as _positive_int


def add(sub):
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
    f = p.add_argument_group("train_step features (zoo.training.features; they compose)")
    f.add_argument("--accumulation-steps", type=int, metavar="K", help="accumulate gradients over K micro-batches")
    f.add_argument("--clip-norm", type=float, help="clip the global-batch gradient to this global norm")
    f.add_argument("--mixed-precision", metavar="POLICY", help="mixed_float16 (dynamic loss scaling) or mixed_bfloat16")
    f.add_argument("--sam-rho", type=float, help="sharpness-aware minimization with this radius (e.g. 0.05)")
    f.add_argument("--teacher", metavar="MODEL.keras", help="distill from this saved model")
    f.add_argument("--distill-alpha", type=float, help="weight of the hard-label loss (default 0.5)")
    f.add_argument("--distill-temperature", type=float, help="softmax temperature (default 4)")
    f.add_argument("--mixup", type=float, metavar="ALPHA", dest="mixup_alpha", help="mixup with Beta(ALPHA, ALPHA)")
    f.add_argument("--cutmix", type=float, metavar="ALPHA", dest="cutmix_alpha", help="cutmix with Beta(ALPHA, ALPHA)")
    f.add_argument("--ema-decay", type=float, help="keep an EMA of the weights; evaluate and export it")
    f.add_argument("--gradient-checkpointing", action="store_true", default=None, help="recompute activations in backward")
    f.add_argument("--qat", action="store_true", default=None,
                   help="quantization-aware training: fake int8 weights/activations, BatchNorm folded; exports full int8")
    f.add_argument("--qat-from", metavar="MODEL.keras", help="fine-tune this trained float model quantization-aware")
    f.add_argument("--qat-freeze-bn-after", type=int, metavar="STEPS", help="QAT: freeze BatchNorm statistics after STEPS")
    r = p.add_argument_group("reproducibility, resume, checks, multi-worker")
    r.add_argument("--deterministic", action="store_true", default=None,
                   help="with --seed: bitwise identical runs (enables op determinism)")
    r.add_argument("--backup-every", type=_positive_int, metavar="STEPS",
                   help="save the resumable state every STEPS steps (default 100) and at each epoch end")
    r.add_argument("--sanity-check", action="store_true", default=None,
                   help="first check the model can overfit one batch (zoo.check.overfit_batch)")
    r.add_argument("--workers", type=_positive_int, metavar="N",
                   help="launch N local workers (127.0.0.1, free ports) with --strategy multi_worker")
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
        "accumulation_steps": args.accumulation_steps, "clip_norm": args.clip_norm,
        "mixed_precision": args.mixed_precision, "sam_rho": args.sam_rho, "teacher": args.teacher,
        "distill_alpha": args.distill_alpha, "distill_temperature": args.distill_temperature,
        "mixup_alpha": args.mixup_alpha, "cutmix_alpha": args.cutmix_alpha, "ema_decay": args.ema_decay,
        "gradient_checkpointing": args.gradient_checkpointing, "deterministic": args.deterministic,
        "backup_every": args.backup_every, "sanity_check": args.sanity_check,
        "qat": args.qat, "qat_from": args.qat_from, "qat_freeze_bn_after": args.qat_freeze_bn_after,
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
    if args.workers and args.workers > 1 and "TF_CONFIG" not in os.environ:
        from zoo import multi_worker

        argv = _strip_workers(getattr(args, "argv", None) or sys.argv[1:])
        if argv and argv[0] == "train":
            argv = argv[1:]
        if "--strategy" in argv:
            i = argv.index("--strategy")
            del argv[i:i + 2]
        train_config_from_args(args).validate()  # bad input fails here, before any worker starts
        return multi_worker.launch(argv, args.workers)
    if args.cpu_replicas:
        from zoo import distribute

        distribute.split_cpu(args.cpu_replicas)
    from zoo.training.run import train

    config = train_config_from_args(args)
    result = train(config)
    print()
    print(f"recipe:               {config.recipe or '-'} ({config.model} on {config.dataset})")
    print(f"run directory:        {result.run_dir}")
    if result.resumed_from:
        r = result.resumed_from
        print(f"resumed from:         epoch {r['epoch'] + 1}, step {r['step_in_epoch']} (global step {r['global_step']})")
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
