"""`zoo export`: every format, verified in its runtime, with a report."""

from __future__ import annotations

import os
import sys

from zoo.cli.common import add_measure_flags, add_untrusted_flags


def add(sub):
    from zoo.core.options import add_arguments
    from zoo.deploy.export.data import DEFAULT_SPLITS
    from zoo.deploy.formats import FORMATS, cli_options
    from zoo.deploy.formats.routes import ROUTES

    p = sub.add_parser(
        "export",
        help=f"export to {', '.join(FORMATS)}, verify each in its runtime, write a report",
        description="Plans the export (checks every format, option, the model and the data first), then runs it. "
                    "Exits 1 if any requested artifact failed (after writing all the others), 2 on bad input. "
                    "With --check, converts nothing: lists per format the ops (and their Keras layers) it cannot "
                    "run, in seconds, and exits 0 if every format runs what zoo export would convert (the model, "
                    "or its RNN route) with its own ops, 1 if some cannot (or needs TFLite's Flex delegate), 2 on "
                    "bad input. "
                    "The format options below are each format's own declarations (zoo/deploy/formats/).",
    )
    p.add_argument("model", help="path to a .keras file (or a run directory), or a registry name (untrained)")
    p.add_argument("--check", action="store_true",
                   help="deployability check only: which formats cannot run which ops of which layers (exit 1 if "
                        "any); no conversion, no data needed; with --out, also written as <out>/check.json")
    p.add_argument("--dry-run", action="store_true",
                   help="check and print the plan (artifacts, data of each role), convert nothing")
    p.add_argument("--formats", default=None,
                   help=f"comma-separated, of: {', '.join(FORMATS)} (default: each whose runtime is installed)")
    p.add_argument("--out", default=None, help="output directory for artifacts and reports (default exports/<model>)")
    p.add_argument("--dataset", default=None,
                   help="test split for parity and accuracy, train split for int8 calibration (e.g. mnist)")
    p.add_argument("--data", metavar="PATH",
                   help="your own data the model was trained on (zoo train --data): its test split for parity and "
                        "accuracy, its train split for int8 calibration, its validation split for the int8 guards")
    p.add_argument("--train-split", default=DEFAULT_SPLITS["calibration"],
                   help="int8 calibration inputs are drawn from it (with --data: a split of your data, default train)")
    p.add_argument("--val-split", default=DEFAULT_SPLITS["validation"],
                   help="data the int8 guards (--max-accuracy-drop, --min-agreement) measure on; never the test split "
                        "(with --data: a split of your data, default validation; train where that split holds "
                        "fewer inputs than --min-agreement needs)")
    p.add_argument("--test-split", default=DEFAULT_SPLITS["test"])
    p.add_argument("--data-dir", default=None)
    add_measure_flags(p)
    p.add_argument("--no-verify", dest="verify", action="store_false", help="convert only")
    p.add_argument("--route", default=None, choices=tuple(ROUTES),
                   help="what every format converts from: " + "; ".join(f"{r.name}: {r.converts_from}"
                                                                       for r in ROUTES.values())
                   + " (default: each format's first route that is installed: tensorflow where it is)")
    p.add_argument("--class-names", default=None, metavar="NAMES|FILE",
                   help="a classifier's class names, comma-separated or a text file with one per line: written into "
                        "every artifact (SavedModel labels.txt and classify signature, each format's metadata)")
    add_arguments(p, cli_options())
    add_untrusted_flags(p, keras=True)
    p.set_defaults(func=_cmd_export)


def export_data(args, model):
    """The data of each role (`zoo.deploy.export.ExportData`) from --dataset or --data; None without either."""
    from zoo.deploy.export import ExportData
    from zoo.deploy.export.data import DEFAULT_SPLITS

    if args.data:
        # The dataset defaults name a slice of a registered dataset's train split; your data has its own splits.
        given = {role: split for role, split, default in (
            ("calibration_split", args.train_split, DEFAULT_SPLITS["calibration"]),
            ("validation_split", args.val_split, DEFAULT_SPLITS["validation"])) if split != default}
        return ExportData.from_path(args.data, model, max_test_samples=args.eval_samples, **given)
    if args.dataset:
        return ExportData.from_dataset(args.dataset, test_split=args.test_split, calibration_split=args.train_split,
                                       validation_split=args.val_split, data_dir=args.data_dir,
                                       max_test_samples=args.eval_samples)
    return None if args.eval_samples is None else ExportData(max_test_samples=args.eval_samples)


def _cmd_export(args) -> int:
    import zoo.deploy.export
    from zoo.cli.common import trust_from_args
    from zoo.core.options import given_values
    from zoo.deploy.formats import DEFAULT_FORMATS, cli_options

    from zoo.deploy.artifacts.reference import resolve_model

    given = given_values(args, cli_options())
    # A registry name, a .keras file or a run folder: the plan takes the reference (and keeps its file and run);
    # the model is loaded once, here, for the data flags that read data as it was trained on.
    ref = resolve_model(args.model, trust_from_args(args))
    model = ref.model
    if args.check:
        return _check(model, args, given)
    out = args.out or os.path.join("exports", model.name)
    plan = zoo.deploy.export.plan(
        ref, out, args.formats or DEFAULT_FORMATS, data=export_data(args, model),
        latency_runs=args.latency_runs, verify=args.verify, class_names=_class_names(args.class_names),
        route=args.route, card={"source": args.model, **({"dataset": args.dataset} if args.dataset else {}),
              **({"data": args.data} if args.data else {})}, trust=ref.trust, **given,
    )
    if args.dry_run:
        print(plan.describe())
        return 0
    print(f"data: {plan.data.description}")
    for warning in plan.memory_warnings():  # before any conversion starts
        print(f"memory: {warning}", file=sys.stderr)
    report = zoo.deploy.export.execute(plan)
    print(report.table())
    print(f"report: {os.path.join(out, 'report.md')}")
    return 0 if report.ok else 1


def _check(model, args, given: dict) -> int:
    """`zoo export --check`: `zoo.deploy.export.check`'s table; exit 0 when every format runs the model, else 1."""
    import zoo.deploy.export
    from zoo.deploy.formats import DEFAULT_FORMATS

    other = sorted(k for k in given if k != "opset")
    if other:
        print(f"note: --check ignores the conversion option(s) {', '.join(other)}")
    report = zoo.deploy.export.check(model, args.formats or DEFAULT_FORMATS, opset=given.get("opset"))
    print(report.table())
    if args.out:  # for CI: the same answer as data
        from zoo.fileio import atomic_write_text

        path = atomic_write_text(os.path.join(args.out, "check.json"), report.to_json())
        print(f"check: {path}")
    return report.exit_code


def _class_names(value: str | None) -> list[str] | None:
    """--class-names: a file of one name a line, else a comma-separated list."""
    if value is None:
        return None
    if os.path.isfile(value):
        with open(value, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip()]
        if not names:
            raise ValueError(f"--class-names file {value} holds no names (one a line expected).")
        return names
    return [name.strip() for name in value.split(",") if name.strip()]
