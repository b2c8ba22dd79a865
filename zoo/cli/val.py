"""`zoo val ARTIFACT --data PATH_OR_DATASET`: the task metric of any artifact, in its own runtime."""

from __future__ import annotations

from zoo.cli.common import add_untrusted_flags, positive_int, trust_from_args


def add(sub):
    from zoo.deploy.formats import KINDS

    p = sub.add_parser(
        "val",
        help="measure any artifact on a folder, a CSV or a dataset: accuracy with per-class precision/recall and a "
             "confusion matrix, or MAE with a residual plot",
        description="Reads the data the way the model was trained on it (its metadata records how) and runs the "
                    "artifact in its own runtime. Writes report.json, report.md and a PNG to --out.",
    )
    p.add_argument("artifact", help=f"an artifact of any kind zoo knows ({', '.join(KINDS)}: a file or its folder), "
                                    "a SavedModel base directory, or a run directory")
    p.add_argument("--data", required=True, metavar="PATH_OR_DATASET",
                   help="an image or text folder, a CSV/Parquet file, a series CSV, or a dataset name (e.g. mnist)")
    p.add_argument("--split", help="test, validation, train or all for a path (default: test where the data has one, "
                                   "else all); a split spec for a dataset (default test)")
    p.add_argument("--out", metavar="DIR", help="where report.json, report.md and the plot go (default val-<name>)")
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument("--threads", type=positive_int, default=2, help="runtime threads (TFLite, ONNX, OpenVINO)")
    add_untrusted_flags(p, keras=True)
    p.add_argument("--data-dir", default=None, help="for a dataset name: where prepared datasets live")
    p.set_defaults(func=_cmd_val)


def _cmd_val(args) -> int:
    import os
    import sys

    from zoo.deploy.artifacts.artifact import describe, load
    from zoo.deploy.artifacts.validation import val

    artifact = load(args.artifact, threads=args.threads, trust=trust_from_args(args))
    print(describe(artifact), file=sys.stderr)
    report = val(artifact, args.data, split=args.split, batch_size=args.batch_size, data_dir=args.data_dir)
    name = os.path.splitext(os.path.basename(os.path.normpath(str(artifact.path))))[0]
    out = report.write(args.out or f"val-{name}")
    print(report.table())
    print(f"report: {os.path.join(out, 'report.md')}")
    return 0
