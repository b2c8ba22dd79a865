"""Start-up of zoo's processes: importing TensorFlow, Keras and NNCF with and without `zoo.lean_imports`.

Every `zoo` command that touches a model, the conversion process of every export and each training worker
imports TensorFlow and Keras first (and NNCF for OpenVINO int8). `zoo.lean_imports` holds back the optional
packages those imports take when installed (scikit-learn, pandas, matplotlib, JAX, PyTorch). Each case runs
in a fresh Python process, the two modes interleaved repetition by repetition; CPU-seconds (user + system, the
whole process) measure the work whatever else runs on the machine, wall seconds include the disk.

    python scripts/benchmark.py startup            # 7 repetitions
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

# case -> the imports a process of that kind does first
CASES = {
    "TensorFlow + Keras (every command)": "import tensorflow, keras",
    "+ NNCF (OpenVINO int8)": "import tensorflow, keras, nncf",
}
MODES = {"as installed": "", "held back": "from zoo import lean_imports; lean_imports.hold_back(); "}


def add_arguments(parser) -> None:
    parser.add_argument("--reps", type=int, default=7, help="processes per case and mode (default 7)")


def _one(code: str) -> dict:
    from benchmarks.common import child_env

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=child_env(KERAS_BACKEND="tensorflow"), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}


def _held_packages() -> dict:
    """Which held-back packages are installed here (only those can cost anything)."""
    import importlib.util

    from zoo.lean_imports import HELD_BACK

    return {name: importlib.util.find_spec(name) is not None for name in HELD_BACK}


def run(args) -> dict:
    from benchmarks.common import machine, system_load

    load_before = system_load()
    samples = {case: {mode: [] for mode in MODES} for case in CASES}
    for _ in range(args.reps):
        for case, imports in CASES.items():
            for mode, prefix in MODES.items():
                samples[case][mode].append(_one(prefix + imports))
    cases = {}
    for case, by_mode in samples.items():
        medians = {mode: {k: statistics.median(s[k] for s in runs) for k in ("wall_s", "cpu_s")}
                   for mode, runs in by_mode.items()}
        full, lean = medians["as installed"], medians["held back"]
        cases[case] = {"samples": by_mode, "median": medians,
                       "cpu_saved_s": full["cpu_s"] - lean["cpu_s"], "cpu_ratio": full["cpu_s"] / lean["cpu_s"],
                       "wall_ratio": full["wall_s"] / lean["wall_s"]}
    return {"machine": machine(), "reps": args.reps, "installed": _held_packages(), "cases": cases,
            "load": {"before": load_before, "after": system_load()}}


def markdown(result: dict) -> str:
    from benchmarks.common import markdown_table

    m = result["machine"]
    installed = ", ".join(name for name, present in result["installed"].items() if present) or "none"
    lines = ["# Start-up: TensorFlow, Keras and NNCF with the optional packages held back", "",
             f"{m['cpus']} CPUs ({m['cpu_model']}; {', '.join(m['cpu_flags'])}), TensorFlow {m['tensorflow']}, "
             f"Keras {m['keras']}. Median of {result['reps']} fresh processes per case and mode, interleaved. "
             f"Installed of the held-back packages: {installed}.", ""]
    rows = []
    for case, r in result["cases"].items():
        full, lean = r["median"]["as installed"], r["median"]["held back"]
        rows.append({"case": case, "cpu_full": round(full["cpu_s"], 2), "cpu_lean": round(lean["cpu_s"], 2),
                     "saved": round(r["cpu_saved_s"], 2), "cpu_ratio": round(r["cpu_ratio"], 2),
                     "wall_full": round(full["wall_s"], 2), "wall_lean": round(lean["wall_s"], 2),
                     "wall_ratio": round(r["wall_ratio"], 2)})
    lines.append(markdown_table(rows, [("case", "imports"), ("cpu_full", "CPU-s as installed"),
                                       ("cpu_lean", "CPU-s held back"), ("saved", "CPU-s saved"),
                                       ("cpu_ratio", "CPU ratio"), ("wall_full", "wall s as installed"),
                                       ("wall_lean", "wall s held back"), ("wall_ratio", "wall ratio")]))
    load = result["load"]
    if load["before"] and load["after"]:
        lines += ["", f"Load average (1 min) {load['before']['load_1m']} -> {load['after']['load_1m']} on "
                  f"{m['cpus']} CPUs."]
    return "\n".join(lines) + "\n"
