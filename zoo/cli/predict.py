"""`zoo predict ARTIFACT INPUTS...`: predictions on your files from any artifact, in its own runtime."""

from __future__ import annotations

from zoo.cli.common import add_untrusted_flags, positive_int, trust_from_args


def add(sub):
    from zoo.deploy.formats import KINDS

    p = sub.add_parser(
        "predict",
        help=f"run any artifact ({', '.join(KINDS)}, or a run dir) on image files or folders, CSV rows, texts or a "
             "series file",
        description="Reads the inputs as the artifact's metadata says (image size, columns, text, window) and prints "
                    "the top-k classes (or the values) per input.",
    )
    p.add_argument("artifact", help=f"an artifact of any kind zoo knows ({', '.join(KINDS)}: a file or its folder), "
                                    "a SavedModel base directory, or a run directory")
    p.add_argument("inputs", nargs="*", help="image files or folders, CSV/Parquet files, texts or .txt files, "
                                             "a series CSV")
    p.add_argument("--top-k", type=positive_int, default=5, help="classes shown per input (default 5)")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--out", metavar="FILE", help="write the output here (atomically) instead of printing it")
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument("--threads", type=positive_int, default=2, help="runtime threads (TFLite, ONNX, OpenVINO)")
    p.add_argument("--serve-page", action="store_true",
                   help="serve a TF.js artifact's web page (index.html) on 127.0.0.1 instead: drop an image, paste a "
                        "row, see the classes")
    p.add_argument("--port", type=int, default=0, help="with --serve-page: the port (default: a free one)")
    add_untrusted_flags(p, keras=True)
    p.set_defaults(func=_cmd_predict)


def _cmd_predict(args) -> int:
    import sys

    from zoo.deploy.artifacts.artifact import describe, load
    from zoo.deploy.artifacts.prediction import predict

    trust = trust_from_args(args)
    if args.serve_page:
        from zoo.deploy.formats import tfjs_page
        from zoo.deploy.scan import require_safe

        require_safe(args.artifact, trust)
        tfjs_page.serve(args.artifact, port=args.port)
        return 0
    if not args.inputs:
        raise ValueError("No inputs: give image files or folders, CSV files, texts or a series file "
                         "(or --serve-page for a TF.js artifact's web page).")
    artifact = load(args.artifact, threads=args.threads, trust=trust)
    print(describe(artifact), file=sys.stderr)
    result = predict(artifact, args.inputs, top_k=args.top_k, batch_size=args.batch_size)
    text = result.render(args.format)
    if args.out:
        from zoo.fileio import atomic_write_text

        atomic_write_text(args.out, text if text.endswith("\n") else text + "\n")
        print(f"{len(result.names)} predictions written to {args.out}", file=sys.stderr)
    else:
        print(text)
    return 0
