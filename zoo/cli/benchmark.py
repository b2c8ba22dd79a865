"""`zoo benchmark MODEL_OR_RUN`: your model in every format and precision, on your data, as one table
(`zoo.benchmark`). The project's research suites are not here: `python scripts/benchmark.py SUITE`."""

from __future__ import annotations

from zoo.cli.common import add_measure_flags, add_untrusted_flags, positive_int, trust_from_args


def add(sub):
    p = sub.add_parser(
        "benchmark",
        help="your model in every format and precision: size, accuracy (or MAE) on your data, latency",
        description="Exports the model to every format whose runtime is installed, in every precision each offers, "
                    "verifies each artifact in its own runtime on the test split of the data the model was trained "
                    "on, and prints one row per artifact: status, size, metric and batch-1 latency. A format that "
                    "fails keeps its row, with the reason. Given an artifact or a folder of artifacts (an export), "
                    "measures those as they are. Writes benchmark.json, .md and .csv beside the artifacts.",
        epilog="The project's own benchmark suites (training against stock Keras, serving load, ...) run with "
               "`python scripts/benchmark.py SUITE` from a clone (the top-level benchmarks/ folder).",
    )
    p.add_argument("model", metavar="MODEL_OR_RUN",
                   help="a run directory (zoo train's), a .keras file, a registry name (untrained: size and latency "
                        "only), or an exported artifact or a folder of them")
    p.add_argument("--data", metavar="PATH_OR_DATASET",
                   help="the data to measure on: your data's path or a registered dataset (default: the data the "
                        "model was trained on, as its run or metadata records it)")
    p.add_argument("--formats", default=None, help="comma-separated formats (default: every one whose runtime is "
                                                   "installed); an exported folder's artifacts are filtered by it")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where artifacts and benchmark.json/.md/.csv go (default: RUN/benchmark/, else "
                        "benchmark-<model>/)")
    add_measure_flags(p)
    p.add_argument("--threads", type=positive_int, default=2,
                   help="runtime threads when measuring existing artifacts (TFLite, ONNX, OpenVINO)")
    add_untrusted_flags(p, keras=True)
    p.set_defaults(func=_cmd_benchmark)


def _cmd_benchmark(args) -> int:
    import sys

    from zoo.benchmark.measure import benchmark

    report = benchmark(args.model, args.out, data=args.data, formats=args.formats, eval_samples=args.eval_samples,
                       latency_runs=args.latency_runs, trust=trust_from_args(args), threads=args.threads)
    print(report.table())
    print(f"report: {report.out_dir}/benchmark.md", file=sys.stderr)
    return 0 if report.ok else 1
