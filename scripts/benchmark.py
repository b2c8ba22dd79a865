#!/usr/bin/env python
"""Benchmarks; results go to benchmarks/results/ (committed, as timm does).

    python scripts/benchmark.py time-to-accuracy [--recipe mnist_fast] [--target 0.99]
    python scripts/benchmark.py recipes [NAME ...]
"""

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def time_to_accuracy(args) -> None:
    from zoo.benchmarks import time_to_accuracy

    result = time_to_accuracy.run(args.recipe, args.target, args.baseline_epochs, args.seed)
    out = _write(args.results, "time_to_accuracy.json", json.dumps(result, indent=2) + "\n")
    print()
    for run in result["runs"]:
        t = f"{run['time_to_target_s']:.1f} s ({run['epochs_to_target']} epochs)" if run["time_to_target_s"] else "not reached"
        print(f"{run['name']:<28} time to {args.target:.1%}: {t}; final {run['epochs'][-1][2]:.4f}")
    print(f"speed-up vs baseline: {result['speedup_vs_baseline'] or 'n/a (baseline did not reach the target)'}")
    print(f"written: {out}")


def recipes(args) -> None:
    from zoo.benchmarks import recipes

    rows = recipes.run(args.names or None)
    previous = Path(args.results) / "recipes.json"
    if args.names and previous.is_file():  # re-running some recipes keeps the others' rows
        fresh = {r["recipe"] for r in rows}
        rows = [r for r in json.loads(previous.read_text()) if r["recipe"] not in fresh] + rows
        rows.sort(key=lambda r: r["recipe"])
    _write(args.results, "recipes.json", json.dumps(rows, indent=2) + "\n")
    table = recipes.markdown(rows)
    out = _write(args.results, "recipes.md", table)
    print("\n" + table + f"written: {out}")


def _write(folder, name, text):
    from zoo.fileio import atomic_write_text

    return atomic_write_text(Path(folder) / name, text)


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = argparse.ArgumentParser(prog="benchmark")
    sub = parser.add_subparsers(dest="which", required=True)
    tta = sub.add_parser("time-to-accuracy", help="zoo's default recipe vs the keras.io simple MNIST convnet")
    tta.add_argument("--recipe", default="mnist_fast")
    tta.add_argument("--target", type=float, default=0.99)
    tta.add_argument("--baseline-epochs", type=int, default=10)
    tta.add_argument("--seed", type=int, default=0)
    tta.set_defaults(func=time_to_accuracy)
    rec = sub.add_parser("recipes", help="run recipes in full and check their targets")
    rec.add_argument("names", nargs="*", help="recipe names (default: all)")
    rec.set_defaults(func=recipes)
    for p in (tta, rec):
        p.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
