"""`python scripts/benchmark.py SUITE [flags]`: the one dispatch for every suite in `benchmarks.SUITES`. It runs
one suite, or `all`, writes `<suite>.json`, `<suite>.md` and the suite's PNG plots to its results folder
(`benchmarks/results/` unless the suite or `--results` names another), then rebuilds that folder's
`README.md`, the index of every committed result.

    python scripts/benchmark.py training --quick
    python scripts/benchmark.py inference --models lenet5,resnet50
    python scripts/benchmark.py all                 # training, time-to-accuracy, inference, serving

The suite interface is in `benchmarks.common`. Parsing a suite's command line imports that suite only, so
`--help` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import time
from pathlib import Path

from benchmarks import SUITES, suite_summary
from benchmarks.common import RESULTS, stem, write_result

# What `all` runs, in this order. `recipes` trains every recipe in full (about 15 minutes), so
# it runs only when named, as do the suites of hours (compat, tables).
ALL = ("training", "time-to-accuracy", "inference", "serving")


def _suite(name: str):
    return importlib.import_module(SUITES[name])


def build_parser(prog: str = "benchmark.py", suites=None) -> argparse.ArgumentParser:
    """The suites' parser. Only the suites in `suites` (default: all) are imported for their flags; the
    others are listed by name and summary, so parsing one suite's command line imports only that suite."""
    parser = argparse.ArgumentParser(
        prog=prog, description="The project's benchmarks, with same-run baselines; results go to "
                               "benchmarks/results/ (or the suite's own folder).")
    sub = parser.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for name in SUITES:
        p = sub.add_parser(name, help=suite_summary(SUITES[name]))
        default = RESULTS
        if suites is None or name in suites:
            suite = _suite(name)
            suite.add_arguments(p)
            default = getattr(suite, "RESULTS", RESULTS)
        p.add_argument("--results", default=str(default), help="folder for the results (default: %(default)s)")
    p = sub.add_parser("all", help=f"run {', '.join(ALL)} with their defaults")
    p.add_argument("--results", default=str(RESULTS))
    return parser


def run_suite(name: str, args: argparse.Namespace) -> dict:
    """Runs one suite and writes its results; returns the result."""
    suite = _suite(name)
    folder = Path(args.results)
    start = time.perf_counter()
    result = suite.run(args)
    result.setdefault("wall_s", round(time.perf_counter() - start, 1))
    written = write_result(folder, name, result, suite.markdown)
    if hasattr(suite, "plots"):
        written += suite.plots(result, folder)
    write_index(folder)
    print("\n" + suite.markdown(result))
    print("written: " + ", ".join(str(p) for p in written))
    return result


def write_index(folder: Path) -> Path:
    """`README.md` in the results folder: every suite's committed summary, in SUITES order."""
    from zoo.fileio import atomic_write_text

    parts = [
        "# Benchmark results\n",
        "Written by `python scripts/benchmark.py SUITE` (`benchmarks/`); do not edit by hand. Every ratio is "
        "measured against a baseline run in the same process, on the machine recorded in each JSON file.\n",
    ]
    for name in SUITES:
        md = folder / f"{stem(name)}.md"
        if md.is_file():
            pngs = sorted(p.name for p in folder.glob(f"{stem(name)}*.png"))
            body = re.sub(r"^(#+) ", r"##\1 ", md.read_text().strip(), flags=re.M)  # under this "## name"
            parts.append(f"## {name}\n\n[`{stem(name)}.json`]({stem(name)}.json)\n\n" + body + "\n")
            parts += [f"![{p}]({p})\n" for p in pngs]
    return atomic_write_text(folder / "README.md", "\n".join(parts))


def main(argv=None, prog: str = "benchmark.py") -> int:
    """Exit status 0; 1 when a suite's result says `"ok": False` (e.g. a backend that failed to run)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(prog, suites=ALL if chosen == "all" else [chosen] if chosen in SUITES else ())
    args = parser.parse_args(argv)
    Path(args.results).mkdir(parents=True, exist_ok=True)
    names = ALL if args.suite == "all" else (args.suite,)
    ok = True
    for name in names:
        if args.suite == "all":  # each suite with its own defaults
            print(f"\n=== {name} ===", flush=True)
            suite_args = parser.parse_args([name, "--results", args.results])
        else:
            suite_args = args
        ok &= run_suite(name, suite_args).get("ok", True) is not False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
