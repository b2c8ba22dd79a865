"""`zoo benchmark`: the speed suites (parsed by zoo.benchmarks.cli)."""

from __future__ import annotations

import argparse


def add(sub):
    p = sub.add_parser(
        "benchmark", add_help=False,
        help="speed against peers and the machine's limit (zoo benchmark --help for the suites)",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER)  # parsed by zoo.benchmarks.cli, imported only when used
    p.set_defaults(func=_cmd_benchmark)


def _cmd_benchmark(args) -> int:
    from zoo.benchmarks.cli import main

    return main(args.rest)
