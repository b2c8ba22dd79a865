"""Runs recipes in full and records whether each reaches its target (issue: the zoo, recipes table).

Results go to benchmarks/results/recipes.json and recipes.md; CI does not run this.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine
from zoo.architectures import registry
from zoo.training import list_recipes, load_recipe, train
from zoo.training.tasks import get_task


def run_one(name: str, **overrides) -> dict:
    # A fresh run directory: an old backup/ there would make the run resume instead of start.
    overrides.setdefault("out", tempfile.mkdtemp(prefix=f"zoo-recipe-{name}-"))
    config = load_recipe(name, export_dir=None, **overrides)
    task = get_task(registry.get_spec(config.model).task)
    start = time.perf_counter()
    result = train(config)
    wall = time.perf_counter() - start
    value = result.test_metrics.get(task.monitor)
    row = {
        "recipe": name,
        "model": config.model,
        "dataset": config.dataset,
        "epochs": config.epochs,
        "metric": f"test {task.monitor}",
        "value": value,
        "target": config.target,
        "train_time_s": round(result.train_time_s, 1),
        "wall_time_s": round(wall, 1),
        "baseline": result.baseline,
    }
    row["passed"] = _passed(row, task.mode)
    return row


def _passed(row: dict, mode: str):
    """Target met; with a baseline, the recipe's own criterion against it."""
    value, target, base = row["value"], row["target"], row["baseline"]
    if value is None:
        return None
    ok = True
    if target is not None:
        ok &= value >= target if mode == "max" else value <= target
    if base is not None:
        margin = base.get("margin", 0.0)
        ok &= value >= base["value"] - margin if base.get("higher_is_better", True) else value < base["value"]
    return bool(ok)


def _in_words(row: dict) -> str:
    """The comparison in the units people quote: perplexity, MAE in the series' own units."""
    base, value = row["baseline"] or {}, row["value"]
    if value is None:
        return ""
    if "perplexity" in base:
        return f"perplexity {math.exp(value):.2f} vs {base['perplexity']:.2f}"
    if "scale" in base:
        return f"MAE {value * base['scale']:.2f} vs {base['value_original_units']:.2f} (original units)"
    return ""


def add_arguments(parser) -> None:
    parser.add_argument("names", nargs="*", help="recipe names (default: all); others keep their last rows")


def run(args) -> dict:
    """Runs the named recipes (default all); rows of recipes not named are kept from the last results."""
    names = args.names or list_recipes()
    rows = [run_one(n) for n in names]
    previous = Path(args.results) / "recipes.json"
    if args.names and previous.is_file():
        fresh = {r["recipe"] for r in rows}
        rows = [r for r in json.loads(previous.read_text())["rows"] if r["recipe"] not in fresh] + rows
    rows.sort(key=lambda r: r["recipe"])
    return {"benchmark": "recipes", "machine": machine(), "rows": rows}


def markdown(result: dict) -> str:
    rows = result["rows"]
    lines = [
        "| recipe | model | dataset | epochs | metric | value | target / baseline | passed | train time (s) | in words |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = f"{r['target']:g}" if r["target"] is not None else ""
        if r["baseline"]:
            ref += f" {r['baseline']['name']}: {r['baseline']['value']:.4f}"
        value = f"{r['value']:.4f}" if r["value"] is not None else "-"
        lines.append(
            f"| {r['recipe']} | {r['model']} | {r['dataset']} | {r['epochs']} | {r['metric']} | {value} | "
            f"{ref.strip()} | {'yes' if r['passed'] else 'NO'} | {r['train_time_s']} | {_in_words(r)} |"
        )
    return "\n".join(lines) + "\n"

