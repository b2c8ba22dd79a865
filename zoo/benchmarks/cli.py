"""`zoo benchmark SUITE [flags]` (and `scripts/benchmark.py`): runs one suite, or `all`, and writes
`<suite>.json`, `<suite>.md` and the suite's PNG plots to `benchmarks/results/`, then rebuilds
`benchmarks/results/README.md`, the index of every committed result.

    zoo benchmark training --quick
    zoo benchmark inference --models lenet5,resnet50
    zoo benchmark all                 # training, time-to-accuracy, inference, serving

Suites are listed in `zoo.benchmarks.SUITES`; their interface is in `zoo.benchmarks.common`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
from pathlib import Path

from zoo.benchmarks import SUITES, suite_summary

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
# What `all` runs, in this order. `recipes` trains every recipe in full (about 15 minutes), so
# it runs only when named.
ALL = ("training", "time-to-accuracy", "inference", "serving")


def _suite(name: str):
    return importlib.import_module(SUITES[name])


def build_parser(prog: str = "zoo benchmark", suites=None) -> argparse.ArgumentParser:
    """The suites' parser. Only the suites in `suites` (default: all) are imported for their flags; the
    others are listed by name and summary, so parsing one suite's command line imports only that suite."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Benchmarks with same-run baselines; results go to benchmarks/results/."
    )
    sub = parser.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for name in SUITES:
        p = sub.add_parser(name, help=suite_summary(SUITES[name]))
        if suites is None or name in suites:
            _suite(name).add_arguments(p)
        p.add_argument("--results", default=str(RESULTS), help="folder for the results (default: %(default)s)")
    p = sub.add_parser("all", help=f"run {', '.join(ALL)} with their defaults")
    p.add_argument("--results", default=str(RESULTS))
    return parser


def run_suite(name: str, args: argparse.Namespace) -> dict:
    """Runs one suite and writes its results; returns the result."""
    from zoo.fileio import atomic_write_text

    suite = _suite(name)
    folder = Path(args.results)
    start = time.perf_counter()
    result = suite.run(args)
    result.setdefault("wall_s", round(time.perf_counter() - start, 1))
    stem = name.replace("-", "_")
    atomic_write_text(folder / f"{stem}.json", json.dumps(result, indent=2, default=_jsonable) + "\n")
    text = suite.markdown(result)
    atomic_write_text(folder / f"{stem}.md", text)
    written = [folder / f"{stem}.json", folder / f"{stem}.md"]
    if hasattr(suite, "plots"):
        written += suite.plots(result, folder)
    write_index(folder)
    print("\n" + text)
    print("written: " + ", ".join(str(p) for p in written))
    return result


def write_index(folder: Path) -> Path:
    """`README.md` in the results folder: every suite's committed summary, in SUITES order."""
    from zoo.fileio import atomic_write_text

    parts = [
        "# Benchmark results\n",
        "Written by `zoo benchmark` (`scripts/benchmark.py`); do not edit by hand. Every ratio is measured "
        "against a baseline run in the same process, on the machine recorded in each JSON file.\n",
    ]
    for name in SUITES:
        stem = name.replace("-", "_")
        md = folder / f"{stem}.md"
        if md.is_file():
            pngs = sorted(p.name for p in folder.glob(f"{stem}*.png"))
            body = re.sub(r"^(#+) ", r"##\1 ", md.read_text().strip(), flags=re.M)  # under this "## name"
            parts.append(f"## {name}\n\n[`{stem}.json`]({stem}.json)\n\n" + body + "\n")
            parts += [f"![{p}]({p})\n" for p in pngs]
    return atomic_write_text(folder / "README.md", "\n".join(parts))


def _jsonable(value):
    """numpy scalars and arrays, Paths: what suites put in results without thinking about JSON."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def main(argv=None, prog: str = "zoo benchmark") -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(prog, suites=ALL if chosen == "all" else [chosen] if chosen in SUITES else ())
    args = parser.parse_args(argv)
    Path(args.results).mkdir(parents=True, exist_ok=True)
    if args.suite != "all":
        run_suite(args.suite, args)
        return 0
    for name in ALL:  # each suite with its own defaults
        print(f"\n=== {name} ===", flush=True)
        run_suite(name, parser.parse_args([name, "--results", args.results]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
