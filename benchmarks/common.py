"""What every benchmark suite shares: the machine's description, a bounded timing loop and
latency statistics.

A suite is a module in `benchmarks` with

    add_arguments(parser)            # its flags
    run(args) -> dict                # JSON-serialisable result; baselines measured in the same run
    markdown(result) -> str          # the summary table(s)
    plots(result, folder) -> [Path]  # optional: PNGs (matplotlib, Agg backend)

and an entry in `benchmarks.SUITES`. `python scripts/benchmark.py NAME`
(`benchmarks.cli`) runs it and writes `<name>.json`, `<name>.md` and
its plots to `benchmarks/results/`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]  # the repository: zoo/, benchmarks/, results/
RESULTS = ROOT / "benchmarks" / "results"


def stem(suite: str) -> str:
    """The file stem of a suite's results: `serving-swap` -> `serving_swap`."""
    return suite.replace("-", "_")


def write_result(folder, suite: str, result: dict, markdown: Callable[[dict], str]) -> list[Path]:
    """`<stem>.json` and `<stem>.md` of `result` in `folder`, each written atomically (a suite that saves as it
    goes calls this after each part, so an interrupted run keeps what it measured)."""
    import json

    from zoo.fileio import atomic_write_text, ensure_dir

    folder = ensure_dir(folder)
    name = stem(suite)
    return [atomic_write_text(folder / f"{name}.json", json.dumps(result, indent=2, default=_jsonable) + "\n"),
            atomic_write_text(folder / f"{name}.md", markdown(result))]


def _jsonable(value):
    """numpy scalars and arrays, Paths, non-finite floats: what suites put in results without thinking of JSON."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def child_env(**extra) -> dict:
    """The environment of a child Python process that imports `benchmarks` (`python -m benchmarks.x`) and this
    checkout's `zoo`, wherever it was started from."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"), **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    return env


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# CPU features that decide which kernels oneDNN can use (fp32 AVX-512, int8 VNNI, bf16 dot products, AMX).
SPEED_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def system_load() -> dict | None:
    """The 1/5/15-minute load averages and the number of CPUs: how busy the machine was around a run.

    A load above the CPU count means other processes competed for the cores; ratios measured in
    one interleaved run stay comparable, absolute rates do not.
    """
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return None
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "load_15m": round(fifteen, 2),
            "cpus": os.cpu_count()}


def machine() -> dict:
    """The machine and the stack, recorded with every result."""
    import importlib.metadata as md

    def version(name):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    cpu_model, flags = None, []
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        cpu_model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), None)
        present = next((set(line.split(":", 1)[1].split()) for line in lines if line.startswith("flags")), set())
        flags = [f for f in SPEED_FLAGS if f in present]
    except OSError:
        pass
    packages = ("tensorflow", "keras", "ai-edge-litert", "onnxruntime", "tf2onnx", "tensorflowjs", "torch")
    return {
        "cpus": cpu_count(),
        "cpu_model": cpu_model,
        "cpu_flags": flags,
        "platform": platform.platform(),
        "python": platform.python_version(),
        **{p: version(p) for p in packages},
    }


def percentile(values, q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation, as numpy's default."""
    xs = sorted(values)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


@dataclasses.dataclass
class Timing:
    """Per-call wall times of one measured function, in milliseconds."""

    times_ms: list[float]

    @property
    def reps(self) -> int:
        return len(self.times_ms)

    @property
    def median_ms(self) -> float:
        return percentile(self.times_ms, 50)

    @property
    def p90_ms(self) -> float:
        return percentile(self.times_ms, 90)

    @property
    def p99_ms(self) -> float:
        return percentile(self.times_ms, 99)

    def throughput(self, items_per_call: int) -> float:
        """Items per second at the median call time."""
        return items_per_call / (self.median_ms / 1e3) if self.median_ms > 0 else math.inf

    def summary(self, items_per_call: int = 1) -> dict:
        return {
            "median_ms": round(self.median_ms, 4),
            "p90_ms": round(self.p90_ms, 4),
            "reps": self.reps,
            "throughput_per_s": round(self.throughput(items_per_call), 2),
        }


def measure(fn: Callable[[], object], *, warmup: int = 2, min_reps: int = 5, max_reps: int = 1000,
            budget_s: float = 2.0) -> Timing:
    """Times `fn()` after `warmup` untimed calls: at least `min_reps` calls, then more until
    `budget_s` of measured time or `max_reps` calls, whichever comes first.

    `fn` must block until its result is ready (e.g. call `.numpy()` on a TF result).
    """
    for _ in range(warmup):
        fn()
    times = []
    spent = 0.0
    while len(times) < max_reps and (len(times) < min_reps or spent < budget_s):
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        times.append(dt * 1e3)
        spent += dt
    return Timing(times)


def first_examples(ds, limit: int):
    """The first `limit` examples of a batched `(x, y)` dataset as float32 `x` and `y` numpy arrays."""
    import numpy as np

    xs, ys, n = [], [], 0
    for x, y in ds:
        xs.append(np.asarray(x))
        ys.append(np.asarray(y))
        n += len(xs[-1])
        if n >= limit:
            break
    return np.concatenate(xs)[:limit].astype(np.float32), np.concatenate(ys)[:limit]


def markdown_table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A Markdown table of `rows` with `columns` given as (key, header); missing values are blank."""

    def cell(v):
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    head = "| " + " | ".join(h for _, h in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(cell(r.get(k)) for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body]) + "\n"


def pyplot():
    """matplotlib's pyplot on the Agg backend: plots go to files, no display is needed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path, dpi: int = 120):
    """Lays out `fig`, writes it to `path` atomically (a PNG is never seen half-written), closes it."""
    from pathlib import Path

    from zoo.fileio import atomic_path

    path = Path(path)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    pyplot().close(fig)
    return path
