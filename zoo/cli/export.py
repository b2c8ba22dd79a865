"""`zoo export`: every format, verified in its runtime, with a report."""

from __future__ import annotations

import os

from zoo.cli.common import add_untrusted_flags
from zoo.cli.common import positive_int as _positive_int


def add(sub):
    from zoo.core.options import add_arguments
    from zoo.formats import FORMATS, cli_options

    p = sub.add_parser(
        "export",
        help="export to SavedModel, TFLite, TF.js, ONNX and OpenVINO, verify each in its runtime, write a report",
        description="Exits 1 if any requested artifact failed (after writing all the others), 2 on bad input. "
                    "With --check, converts nothing: lists per format the ops (and their Keras layers) it cannot "
                    "run, in seconds, and exits 0 if every format runs what zoo export would convert (the model, "
                    "or its RNN route) with its own ops, 1 if some cannot (or needs TFLite's Flex delegate), 2 on "
                    "bad input. "
                    "The format options below are each format's own declarations (zoo/formats/).",
    )
    p.add_argument("model", help="path to a .keras file, or a registry name (untrained)")
    p.add_argument("--check", action="store_true",
                   help="deployability check only: which formats cannot run which ops of which layers (exit 1 if "
                        "any); no conversion, no data needed; with --out, also written as <out>/check.json")
    p.add_argument("--formats", default=None,
                   help=f"comma-separated, of: {', '.join(FORMATS)} (default: each whose runtime is installed)")
    p.add_argument("--out", default=None, help="output directory for artifacts and reports (default exports/<model>)")
    p.add_argument("--dataset", default=None,
                   help="test split for parity and accuracy, train split for int8 calibration (e.g. mnist)")
    p.add_argument("--data", metavar="PATH",
                   help="your own data the model was trained on (zoo train --data): its test split for parity and "
                        "accuracy, its train split for int8 calibration, its validation split for the int8 guards")
    p.add_argument("--train-split", default="train", help="int8 calibration inputs are drawn from it")
    p.add_argument("--val-split", default="train[-10%:]",
                   help="data the int8 guards (--max-accuracy-drop, --min-agreement) measure on; never the test split")
    p.add_argument("--test-split", default="test")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--eval-samples", type=_positive_int, default=None, help="at most this many test examples")
    p.add_argument("--latency-runs", type=int, default=50, help="batch-1 runs timed per artifact (0: skip)")
    p.add_argument("--no-verify", dest="verify", action="store_false", help="convert only")
    p.add_argument("--class-names", default=None, metavar="NAMES|FILE",
                   help="a classifier's class names, comma-separated or a text file with one per line: written into "
                        "every artifact (SavedModel labels.txt and classify signature, each format's metadata)")
    add_arguments(p, cli_options())
    add_untrusted_flags(p, keras=True)
    p.set_defaults(func=_cmd_export)


def _load_model(ref: str, args=None):
    """A registry name is built; a path is scanned first (`zoo.scan`), then loaded in Keras's safe mode."""
    import zoo
    from zoo.formats.model_io import load_model_file

    if os.path.isdir(ref):  # a run directory: its last.keras (zoo.artifacts.artifact)
        from zoo.artifacts.artifact import resolve

        ref = str(resolve(ref)[0])
    if ref.endswith(".keras") or os.sep in ref or os.path.exists(ref):
        return load_model_file(ref, allow_unsafe_ops=getattr(args, "allow_unsafe_ops", None) or (),
                               unsafe_deserialization=getattr(args, "unsafe_deserialization", False))
    return zoo.build(ref)


def _export_data(args, given: dict, model=None) -> tuple:
    """(test_data, description) from --dataset or --data; into `given`, the int8 calibration and the accuracy
    budget's validation data, when asked for."""
    if getattr(args, "data", None):
        return _own_data(args.data, model, given)
    if not args.dataset:
        return None, None
    import zoo.data

    test = zoo.data.load(args.dataset, args.test_split, batch_size=1000, data_dir=args.data_dir)
    if "int8" in (given.get("precision") or ()):
        given["representative_data"] = zoo.data.load(args.dataset, args.train_split, batch_size=100, seed=0,
                                                     data_dir=args.data_dir)
    if _guarded(given):
        given["validation_data"] = zoo.data.load(args.dataset, args.val_split, batch_size=1000, data_dir=args.data_dir)
    return test, f"{args.dataset} {args.test_split} split"


def _own_data(path, model, given: dict):
    """(test data, description) of your own data, read as the model was trained; into `given`, its train split
    for int8 calibration and its validation split for the accuracy budget, when asked for."""
    import numpy as np

    from zoo.formats import metadata
    from zoo.artifacts.val import labelled_batches
    from zoo.errors import DataError

    meta = metadata.of_model(model)
    if meta is None:
        raise DataError(f"--data {path}: the model has no zoo metadata (train it with `zoo train --data`); for a "
                        "registered dataset use --dataset.")

    def arrays(split):
        batches, _, split, _ = labelled_batches(meta, path, split, batch_size=1000)
        xs, ys = zip(*batches)
        return (np.concatenate(xs), np.concatenate(ys)), split

    test, split = arrays(None)
    if "int8" in (given.get("precision") or ()):
        given["representative_data"] = arrays("train")[0][0]
    if _guarded(given):
        given["validation_data"] = arrays("validation")[0]
    return test, f"{path} {split} split"


def _guarded(given: dict) -> bool:
    """An int8 guard (--max-accuracy-drop, --min-agreement) was given: it measures on the validation split."""
    from zoo.formats.base import INT8_GUARDS

    return any(given.get(name) is not None for name in INT8_GUARDS)


def _cmd_export(args) -> int:
    import zoo.export
    import zoo.formats
    from zoo.core.options import given_values
    from zoo.formats import cli_options

    given = given_values(args, cli_options())
    model = _load_model(args.model, args)
    if args.check:
        return _check(model, args, given)
    test, description = _export_data(args, given, model)
    out = args.out or os.path.join("exports", model.name)
    report = zoo.export.export(
        model, out, args.formats or zoo.formats.DEFAULT_FORMATS, test_data=test, max_eval_samples=args.eval_samples,
        data_description=description, latency_runs=args.latency_runs, verify=args.verify,
        card={"source": args.model, **({"dataset": args.dataset} if args.dataset else {}),
              **({"data": args.data} if args.data else {})}, **given,
        allow_unsafe_ops=args.allow_unsafe_ops, unsafe_deserialization=args.unsafe_deserialization,
        class_names=_class_names(args.class_names),
    )
    print(report.table())
    print(f"report: {os.path.join(out, 'report.md')}")
    return 0 if report.ok else 1


def _check(model, args, given: dict) -> int:
    """`zoo export --check`: `zoo.export.check`'s table; exit 0 when every format runs the model, else 1."""
    import zoo.export
    import zoo.formats

    other = sorted(k for k in given if k != "opset")
    if other:
        print(f"note: --check ignores the conversion option(s) {', '.join(other)}")
    report = zoo.export.check(model, args.formats or zoo.formats.DEFAULT_FORMATS, opset=given.get("opset"))
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
