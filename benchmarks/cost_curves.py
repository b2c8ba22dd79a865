"""Cost curves: how training, export and serving costs grow, and where each curve bends.

Three curves, each fitted with the simplest model that explains it, whose
parameters say where and why the curve bends:

- training samples/s against batch size (8 to 1024), zoo `fit` of a model on
  in-memory batches, by wall time and per CPU-second of the process (the
  latter is fitted: on a shared machine it does not move with the load). A
  step costs `t(b) = t0 + b / R`: a fixed cost `t0`
  (the Python fit loop, the executor's launch of every op, the optimizer's
  per-variable updates) plus the compute, at `R` samples/s. So samples/s =
  `b / t(b)` rises about linearly while `b << t0 * R` and levels off at `R`;
  the bend is at `b* = t0 * R`, where both halves of a step cost the same.
- export time of each of the four formats against parameter count (10k to
  25M): `T(p) = a + c * p`. The fixed part `a` (tracing the model, starting
  the converter) dominates small models; from `p* = a / c` on, time grows with
  the weights (serialising, converting, writing them).
- serving throughput and p99 latency against concurrent clients (1 to 64),
  `benchmarks.serving_load`'s closed loop: throughput rises with clients
  until the server's cores are busy, then stays flat; from there Little's law,
  latency = clients / throughput, makes latency grow linearly with clients.
  The bend is the client count where throughput stops growing: the fewest
  clients from which no larger count gains 10% or more.

Every point is measured in one run, on the machine (and load) recorded.
"""

from __future__ import annotations

import gc
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import machine, markdown_table, system_load

BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
TRAINING_MODELS = {"convnet_bn": (32, 32, 3), "resnet20": (32, 32, 3)}
# (registry name, builder overrides, input shape): ~10k to ~25M parameters.
EXPORT_MODELS = (
    ("mlp", {"depth": 1, "width": 12}, (28, 28, 1)),
    ("lenet5", {}, (28, 28, 1)),
    ("resnet20", {}, (32, 32, 3)),
    ("mobilenet_v2", {}, (96, 96, 3)),
    ("resnet18", {}, (96, 96, 3)),
    ("resnet50", {}, (96, 96, 3)),
)
EXPORT_FORMATS = ("saved_model", "tflite", "tfjs", "onnx")
CLIENTS = (1, 2, 4, 8, 16, 32, 64)
MIN_REQUESTS = 600  # per serving point, all clients together: about a second at the server's rate
CURVES = ("training", "export", "serving")


def add_arguments(parser) -> None:
    parser.add_argument("--curves", nargs="+", default=list(CURVES), choices=list(CURVES), help="which curves to measure")
    parser.add_argument("--fit-seconds", type=float, default=1.5, help="timed seconds per training point (1.5)")
    parser.add_argument("--requests-per-client", type=int, default=40, help="serving requests per client (40)")


def run(args) -> dict:
    result = {"benchmark": "cost_curves", "machine": machine(), "load_before": system_load()}
    if "training" in args.curves:
        result["training"] = [training_curve(name, shape, fit_seconds=args.fit_seconds)
                              for name, shape in TRAINING_MODELS.items()]
    if "export" in args.curves:
        result["export"] = export_curve()
    if "serving" in args.curves:
        result["serving"] = serving_curve(args.requests_per_client)
    result["load_after"] = system_load()
    return result


# -- fits ------------------------------------------------------------------------------------------


def fit_affine(x, y) -> tuple[float, float]:
    """Least squares `y = a + c * x`; (a, c)."""
    c, a = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
    return float(a), float(c)


# -- training samples/s against batch size ------------------------------------------------------


def training_curve(name: str, input_shape, batch_sizes=BATCH_SIZES, fit_seconds: float = 1.5, seed: int = 0) -> dict:
    """zoo fit samples/s at each batch size; the step-time fit `t0 + b / R` and its bend `b* = t0 * R`."""
    import keras
    import tensorflow as tf

    from benchmarks.fit_timing import timed_fit
    from zoo.training.builders import build_and_compile
    from zoo.training.config import TrainConfig

    points = []
    for b in batch_sizes:
        keras.utils.set_random_seed(seed)
        config = TrainConfig(model=name, batch_size=b, schedule="constant", jit_compile=False, export_dir=None)
        model = build_and_compile(config, input_shape, 10, steps_per_epoch=None)
        rng = np.random.default_rng(seed)
        x = rng.random((4 * b, *input_shape), dtype=np.float32)
        y = rng.integers(0, 10, 4 * b).astype(np.int32)
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(b).cache().repeat().prefetch(2)
        steps_per_s, _, _ = timed_fit(model, ds, 3, 2)  # tracing, and a first rate to size the timed fit
        steps = max(5, min(400, int(fit_seconds * steps_per_s)))
        steps_per_s, steps_per_cpu_s, _ = timed_fit(model, ds, steps, 3)
        points.append({"batch_size": b, "samples_per_s": round(steps_per_s * b, 1),
                       "samples_per_cpu_s": round(steps_per_cpu_s * b, 1), "step_ms": round(1e3 / steps_per_s, 3),
                       "cpu_step_ms": round(1e3 / steps_per_cpu_s, 3)})
        del model, ds
        keras.backend.clear_session()  # one model at a time: the machine's memory is shared
        gc.collect()
        print(f"[cost] {name} batch {b}: {steps_per_s * b:,.0f} samples/s, {steps_per_cpu_s * b:,.0f} per CPU-s",
              flush=True)
    t0_ms, per_sample_ms = fit_affine([p["batch_size"] for p in points], [p["cpu_step_ms"] for p in points])
    rate = 1e3 / per_sample_ms if per_sample_ms > 0 else math.inf
    bend = t0_ms / per_sample_ms if per_sample_ms > 0 else None
    return {"model": name, "input_shape": list(input_shape), "points": points, "fitted_on": "CPU-seconds",
            "fixed_ms_per_step": round(t0_ms, 3), "compute_samples_per_s": round(rate, 1),
            "bend_batch_size": round(bend, 1) if bend else None}


# -- export time against parameters --------------------------------------------------------------


def export_curve(models=EXPORT_MODELS, formats=EXPORT_FORMATS) -> dict:
    """Each format's conversion time (no verification) for models from ~10k to ~25M parameters."""
    from zoo.architectures import registry
    from zoo.deploy.export.exporter import export

    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-cost-export-") as tmp:
        for name, overrides, shape in models:
            model = registry.build(name, input_shape=shape, num_classes=10, **overrides)
            start = time.perf_counter()
            report = export(model, Path(tmp) / name, formats=",".join(formats), verify=False, latency_runs=0)
            row = {"model": name, "params": int(model.count_params()), "wall_s": round(time.perf_counter() - start, 2)}
            for r in report.results:
                row[r.format] = round(r.export_s, 2) if r.status != "export failed" else None
            rows.append(row)
            print(f"[cost] export {name} ({row['params']:,} params): "
                  + ", ".join(f"{f} {row.get(f)} s" for f in formats), flush=True)
    fits = {}
    for f in formats:
        pts = [(r["params"], r[f]) for r in rows if r.get(f) is not None]
        if len(pts) >= 2:
            a, c = fit_affine(*zip(*pts))
            fits[f] = {"fixed_s": round(a, 3), "s_per_million_params": round(c * 1e6, 3),
                       "bend_params": round(a / c) if c > 0 and a > 0 else None}
    return {"rows": rows, "fits": fits, "formats": list(formats)}


# -- serving against clients ----------------------------------------------------------------------


def saturation_point(points: list[dict], gain: float = 1.1):
    """The fewest clients from which no larger count raises throughput by `gain` or more: the knee.

    Set against every larger count, not only the next one, so that one noisy dip (2 clients slower
    than 1) does not end the curve early.
    """
    for i, p in enumerate(points):
        if all(q["throughput_rps"] < gain * p["throughput_rps"] for q in points[i + 1:]):
            return p["clients"]
    return None


def serving_curve(requests_per_client: int = 40, clients=CLIENTS) -> dict:
    """gRPC throughput and p99 at each client count, batching off and on (`benchmarks.serving_load`)."""
    from benchmarks import serving_load

    measured = serving_load.measure(clients=clients, requests_per_client=requests_per_client, time_limit_s=15.0,
                                    protocols=("grpc",), batching=(False, True), min_requests=MIN_REQUESTS)
    curves = {}
    for batching in ("off", "on"):
        pts = sorted((r for r in measured["rows"] if r["batching"] == batching and r.get("throughput_rps")),
                     key=lambda r: r["clients"])
        if not pts:
            continue
        bend = saturation_point(pts)
        curves[f"batching {batching}"] = {
            "points": [{"clients": p["clients"], "throughput_rps": p["throughput_rps"], "p99_ms": p["p99_ms"]}
                       for p in pts],
            "bend_clients": bend,
        }
    return {"curves": curves, "raw": measured}


# -- report --------------------------------------------------------------------------------------


def markdown(result: dict) -> str:
    m = result["machine"]
    loads = [result.get(k) for k in ("load_before", "load_after") if result.get(k)]
    out = [f"# Cost curves\n\n{m['cpus']} CPUs ({m.get('cpu_model')}; {', '.join(m.get('cpu_flags') or [])}), "
           f"TensorFlow {m['tensorflow']}."
           + (f" Load average (1 min) {' -> '.join(str(lo['load_1m']) for lo in loads)}." if loads else "")
           + "\n\n" + __doc__.split("\n", 1)[1].split("\nEvery point")[0].strip() + "\n"]
    for curve in result.get("training", []):
        out.append(f"\n## Training samples/s against batch size: {curve['model']}\n\n")
        out.append(markdown_table(curve["points"], [("batch_size", "batch"), ("samples_per_s", "samples/s"),
                                                    ("samples_per_cpu_s", "samples per CPU-s"),
                                                    ("cpu_step_ms", "CPU-ms/step")]))
        out.append(f"\nFit of the CPU time per step `t(b) = t0 + b/R`: t0 = {curve['fixed_ms_per_step']} CPU-ms fixed per "
                   f"step, R = {curve['compute_samples_per_s']:,.0f} samples per CPU-second of compute; bend at b* = t0 R = "
                   f"{curve['bend_batch_size']}: below it the fixed per-step cost dominates and samples/s grows "
                   f"with the batch, above it the convolutions do and samples/s levels off.\n")
    exp = result.get("export")
    if exp:
        out.append("\n## Export time against parameter count\n\n")
        out.append(markdown_table(exp["rows"], [("model", "model"), ("params", "params")]
                                  + [(f, f"{f} s") for f in exp["formats"]]))
        fits = [{"format": f, **v} for f, v in exp["fits"].items()]
        out.append("\n" + markdown_table(fits, [("format", "format"), ("fixed_s", "fixed s"),
                                               ("s_per_million_params", "s per M params"),
                                               ("bend_params", "bend (params)")]))
        out.append("\nBelow the bend the fixed cost of tracing and starting the converter dominates; above it "
                   "the time grows with the weights. A format with no bend (a slope of about zero) costs its fixed "
                   "time over the whole range: SavedModel export is tracing the model, whatever its weights.\n")
    serving = result.get("serving")
    if serving:
        out.append("\n## Serving throughput and p99 against clients (gRPC, single-image requests)\n\n")
        for label, curve in serving["curves"].items():
            out.append(f"{label}: throughput stops growing at {curve['bend_clients']} clients (the server's cores "
                       f"are busy); beyond, p99 grows with the clients (Little's law).\n\n")
            out.append(markdown_table(curve["points"], [("clients", "clients"), ("throughput_rps", "requests/s"),
                                                        ("p99_ms", "p99 ms")]) + "\n")
    return "".join(out)


def plots(result: dict, folder) -> list[Path]:
    from benchmarks.common import pyplot, save_figure

    plt = pyplot()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    if result.get("training"):
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for curve in result["training"]:
            b = [p["batch_size"] for p in curve["points"]]
            line = ax.plot(b, [p["samples_per_cpu_s"] for p in curve["points"]], marker="o",
                           label=f"{curve['model']} per CPU-second")[0]
            ax.plot(b, [p["samples_per_s"] for p in curve["points"]], "x", color=line.get_color(), alpha=0.5,
                    label=f"{curve['model']} per second (wall, with the machine's load)")
            grid = np.geomspace(b[0], b[-1], 50)
            fitted = grid / (curve["fixed_ms_per_step"] / 1e3 + grid / curve["compute_samples_per_s"])
            ax.plot(grid, fitted, ":", color=line.get_color(), linewidth=1)
            if curve.get("bend_batch_size"):
                ax.axvline(curve["bend_batch_size"], color=line.get_color(), linestyle="--", linewidth=0.8)
                ax.annotate(f"bend b*={curve['bend_batch_size']:.0f}\n(t0={curve['fixed_ms_per_step']:.1f} ms)",
                            (curve["bend_batch_size"], curve["compute_samples_per_s"] / 2), fontsize=7,
                            color=line.get_color())
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_ylabel("training samples per CPU-second (zoo fit)")
        ax.set_title("Training: fixed per-step cost below the bend, compute above", fontsize=10)
        ax.legend(fontsize=7)
        paths.append(save_figure(fig, folder / "cost_training_batch.png"))
    exp = result.get("export")
    if exp:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for f in exp["formats"]:
            pts = [(r["params"], r[f]) for r in exp["rows"] if r.get(f) is not None]
            if not pts:
                continue
            line = ax.plot(*zip(*pts), marker="o", label=f)[0]
            fit = exp["fits"].get(f) or {}
            bend = fit.get("bend_params")
            if bend:
                ax.axvline(bend, color=line.get_color(), linestyle="--", linewidth=0.8)
                ax.annotate(f"{f}: {bend / 1e6:.1f}M\n({fit['fixed_s']:.1f} s fixed)", (bend, max(t for _, t in pts)),
                            fontsize=6, color=line.get_color(), rotation=90, va="top", ha="right")
            elif fit:
                ax.annotate(f"{f}: flat, {fit['fixed_s']:.1f} s of tracing", (pts[0][0], pts[0][1] * 1.15),
                            fontsize=7, color=line.get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("parameters")
        ax.set_ylabel("export seconds (conversion, no verification)")
        ax.set_title("Export time: fixed cost below the bend (dashed), weights above")
        ax.legend(fontsize=8)
        paths.append(save_figure(fig, folder / "cost_export_params.png"))
    serving = result.get("serving")
    if serving and serving.get("curves"):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.8))
        for label, curve in serving["curves"].items():
            c = [p["clients"] for p in curve["points"]]
            line = ax1.plot(c, [p["throughput_rps"] for p in curve["points"]], marker="o", label=label)[0]
            ax2.plot(c, [p["p99_ms"] for p in curve["points"]], marker="o", label=label, color=line.get_color())
            if curve.get("bend_clients"):
                for ax in (ax1, ax2):
                    ax.axvline(curve["bend_clients"], color=line.get_color(), linestyle="--", linewidth=0.8)
                knee = next(p for p in curve["points"] if p["clients"] == curve["bend_clients"])
                ax1.annotate(f"{label}: cores busy\nfrom {knee['clients']} clients", (knee["clients"],
                             knee["throughput_rps"]), fontsize=7, color=line.get_color(), xytext=(4, 4),
                             textcoords="offset points")
        for ax in (ax1, ax2):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("concurrent clients")
        ax1.set_ylabel("requests/s")
        ax2.set_ylabel("p99 latency (ms)")
        ax2.set_yscale("log")
        ax1.set_title("Throughput saturates (dashed: bend)")
        ax2.set_title("p99 then grows with clients")
        ax1.legend(fontsize=8)
        paths.append(save_figure(fig, folder / "cost_serving_clients.png"))
    return paths
