"""`zoo benchmark`: the speed suites. `zoo benchmark --help` lists them without importing any;
`zoo benchmark SUITE [flags]` (and `SUITE --help`) is parsed by `zoo.benchmarks.cli`, which imports
only that suite."""

from __future__ import annotations

import argparse


def add(sub):
    from zoo.benchmarks import SUITES, suite_summary

    width = max(map(len, SUITES)) + 2
    suites = "\n".join(f"  {name:<{width}}{suite_summary(module)}" for name, module in SUITES.items())
    p = sub.add_parser(
        "benchmark",
        help="speed against peers and the machine's limit (zoo benchmark --help for the suites)",
        description="Benchmarks with same-run baselines; results go to benchmarks/results/.",
        epilog=f"suites:\n{suites}\n  {'all':<{width}}every suite but recipes, with its defaults\n\n"
               "`zoo benchmark SUITE --help` lists a suite's flags.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # A leading SUITE makes argparse hand every later token to `rest`, flags included.
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="SUITE [FLAGS]",
                   help=f"one of: {', '.join([*SUITES, 'all'])}; then that suite's flags")
    p.set_defaults(func=_cmd_benchmark)


def _cmd_benchmark(args) -> int:
    from zoo.benchmarks.cli import main

    return main(args.rest)
