"""The inference benchmark's summary: the targets of the issue, the Markdown tables, a CSV and the plots."""

from __future__ import annotations

import csv
from pathlib import Path

from benchmarks.common import markdown_table

SMALL_MODELS = ("lenet5", "convnet_bn", "resnet20")
CNNS = ("lenet5", "convnet_bn", "resnet20", "mobilenet_v2", "resnet50")
TARGET_SPEEDUP_VS_PREDICT = 10.0
TARGET_INT8_SPEEDUP = 1.5
TARGET_INT8_MAX_LOSS_POINTS = 0.3
TARGET_PCT_PEAK = 50.0


def _ok(rows, **match):
    return [r for r in rows if r.get("status") == "ok" and all(r.get(k) == v for k, v in match.items())]


def _best(rows):
    return min(rows, key=lambda r: r["median_ms"]) if rows else None


def targets(result: dict) -> dict:
    """The issue's three targets and the peer comparison, computed from the rows."""
    rows = result["rows"]
    batches = result["settings"]["batch_sizes"]
    big = max(batches)
    out = {"speedup_vs_predict": [], "int8_vs_fp32": [], "resnet50_pct_peak": None, "peers": []}
    for model in result["models"]:
        predict = _best(_ok(rows, model=model, runtime="keras_predict", batch=1))
        exported = _best([r for r in _ok(rows, model=model, batch=1) if r.get("exported")])
        if model in SMALL_MODELS and predict and exported:
            ratio = predict["median_ms"] / exported["median_ms"]
            out["speedup_vs_predict"].append({
                "model": model, "predict_ms": predict["median_ms"], "best_runtime": _label(exported),
                "best_ms": exported["median_ms"], "speedup": round(ratio, 1),
                "met": ratio >= TARGET_SPEEDUP_VS_PREDICT})
        if model in CNNS:
            for b in batches:
                for t in sorted({r["threads"] for r in _ok(rows, model=model, runtime="litert_int8")}):
                    fp32 = _ok(rows, model=model, runtime="litert_fp32", batch=b, threads=t)
                    int8 = _ok(rows, model=model, runtime="litert_int8", batch=b, threads=t)
                    if not (fp32 and int8):
                        continue
                    fp32, int8 = fp32[0], int8[0]
                    speedup = fp32["median_ms"] / int8["median_ms"]
                    loss = None
                    if int8.get("accuracy") is not None and fp32.get("accuracy") is not None:
                        loss = round(100 * (fp32["accuracy"] - int8["accuracy"]), 2)
                    met = speedup >= TARGET_INT8_SPEEDUP and (loss is None or loss <= TARGET_INT8_MAX_LOSS_POINTS)
                    out["int8_vs_fp32"].append({
                        "model": model, "batch": b, "threads": t, "fp32_ms": fp32["median_ms"],
                        "int8_ms": int8["median_ms"], "speedup": round(speedup, 2), "accuracy_loss_points": loss,
                        "int8_argmax_agreement": int8.get("argmax_agreement"), "met": met})
        if model == "resnet50":
            # The peak is fp32's, so the target is judged on the best fp32 runtime; int8 beside it.
            best = _best(_ok(rows, model=model, batch=big, precision="float32"))
            best_int8 = _best(_ok(rows, model=model, batch=big, precision="int8"))
            if best:
                out["resnet50_pct_peak"] = {
                    "batch": big, "best_runtime": _label(best), "gflops": best["gflops"],
                    "pct_peak": best["pct_peak"], "met": best["pct_peak"] >= TARGET_PCT_PEAK,
                    "best_int8_runtime": _label(best_int8) if best_int8 else None,
                    "best_int8_pct_peak": best_int8["pct_peak"] if best_int8 else None}
        peers = {r["runtime"]: r["compared_with"] for r in rows if r.get("compared_with")}
        for peer, ours in peers.items():
            for b in batches:
                for r in [r for r in rows if r["model"] == model and r["runtime"] == peer and r["batch"] == b]:
                    mine = _ok(rows, model=model, runtime=ours, batch=b, threads=r["threads"])
                    entry = {"model": model, "peer": peer, "ours": ours, "batch": b, "threads": r["threads"],
                             "ours_ms": mine[0]["median_ms"] if mine else None,
                             "ours_accuracy": mine[0].get("accuracy") if mine else None,
                             "ours_max_abs_diff": mine[0].get("max_abs_diff") if mine else None}
                    if r.get("status") != "ok":
                        entry.update(peer_status="failed", peer_error=r.get("error"), faster=bool(mine),
                                     as_accurate=bool(mine))
                    else:
                        entry.update(peer_status="ok", peer_ms=r["median_ms"], peer_accuracy=r.get("accuracy"),
                                     peer_max_abs_diff=r.get("max_abs_diff"))
                        if mine:
                            entry["speed_ratio"] = round(r["median_ms"] / mine[0]["median_ms"], 2)
                            # "At least as fast": within the run's noise (5%) counts as as fast.
                            entry["faster"] = entry["speed_ratio"] >= 0.95
                            entry["as_accurate"] = (_num(mine[0].get("accuracy")) >= _num(r.get("accuracy")) - 1e-9
                                                    and _num(mine[0].get("max_abs_diff"), 0) <=
                                                    max(_num(r.get("max_abs_diff"), 0) * 1.5, 1e-5))
                    out["peers"].append(entry)
    return out


def _num(v, default=0.0):
    return default if v is None else v


def _label(row) -> str:
    return f"{row['runtime']} x{row['threads']}" if row.get("threaded") else row["runtime"]


ROW_COLUMNS = [("runtime", "runtime"), ("threads", "threads"), ("batch", "batch"), ("median_ms", "median ms"),
               ("p90_ms", "p90 ms"), ("throughput_per_s", "items/s"), ("gflops", "GFLOP/s"),
               ("pct_peak", "% peak"), ("accuracy", "accuracy"), ("max_abs_diff", "max |diff| vs Keras"),
               ("argmax_agreement", "argmax agree"), ("parity_ok", "parity"), ("note", "note")]


def markdown(result: dict) -> str:
    peak = result["peak"]
    m = result["machine"]
    parts = [
        "# Inference benchmark\n",
        f"Machine: {m.get('cpu_model')}, {m.get('cpus')} CPUs; TF {m.get('tensorflow')}, Keras {m.get('keras')}, "
        f"LiteRT {m.get('ai-edge-litert')}, onnxruntime {m.get('onnxruntime')}. "
        f"fp32 matmul peak measured in this run: **{peak['gflops']:.0f} GFLOP/s** ({peak['method']}; "
        f"numpy's BLAS: {peak['numpy_best']:.0f}). Settings: {result['settings']}. Wall time {result.get('wall_s')} s.\n",
        "Latency is the median of calls after warm-up (`benchmarks.common.measure`; TF.js timed inside "
        "Node); throughput = batch / median; GFLOP/s from `benchmarks.flops.forward_flops` (multiply-add = "
        "2), and % peak against the fp32 peak for every precision (int8 and fp16 can exceed it). Parity is the "
        "export tolerance of `zoo.deploy.export.verify` against Keras on the evaluation data; for the untrained "
        "models (random weights, near-uniform softmax) int8 argmax agreement means little.\n",
        markdown_table([{"runtime": name, "what": what} for name, what in result["runtimes"].items()],
                       [("runtime", "runtime"), ("what", "what runs")]),
    ]
    parts.append(_targets_markdown(result["targets"]))
    for model, info in result["models"].items():
        if info.get("error"):
            parts.append(f"## {model}\n\nFAILED before timing: {info['error']}\n")
            continue
        rows = [dict(r, accuracy=r.get("accuracy"), note=r.get("note") or r.get("error"))
                for r in result["rows"] if r["model"] == model]
        parts.append(f"## {model}\n")
        parts.append(f"{info['params']:,} parameters, input {tuple(info['input_shape'])}, "
                     f"{info['flops_per_sample'] / 1e6:,.1f} MFLOPs per example. Weights: {info['weights']}. "
                     f"Evaluated on: {info['eval']}.\n")
        failed = {k: a["error"] for k, a in info.get("artifacts", {}).items() if a.get("error")}
        if failed:
            parts.append("Exports that failed: " + "; ".join(f"`{k}`: {v}" for k, v in failed.items()) + "\n")
        parts.append(markdown_table(rows, ROW_COLUMNS))
    failed = {}
    for r in result["rows"]:
        if r.get("status") != "ok":
            failed.setdefault((r["model"], _label(r)), r.get("error"))
    if failed:
        parts.append("## What failed\n")
        parts.append(markdown_table([{"model": m, "runtime": rt, "error": e} for (m, rt), e in failed.items()],
                                    [("model", "model"), ("runtime", "runtime"), ("error", "error")]))
    if result.get("profile"):
        parts.append(_profile_markdown(result["profile"], result["peak"]["gflops"]))
    return "\n".join(parts)


def _targets_markdown(t: dict) -> str:
    lines = ["## Targets\n"]
    lines.append(f"**Best exported runtime vs `model.predict` at batch 1 (target >= {TARGET_SPEEDUP_VS_PREDICT:g}x)**\n")
    lines.append(markdown_table(t["speedup_vs_predict"], [
        ("model", "model"), ("predict_ms", "predict ms"), ("best_runtime", "best exported"), ("best_ms", "ms"),
        ("speedup", "speed-up"), ("met", "met")]))
    lines.append(f"**int8 vs fp32 LiteRT, CNNs (target >= {TARGET_INT8_SPEEDUP:g}x, <= "
                 f"{TARGET_INT8_MAX_LOSS_POINTS:g} points lost)**\n")
    lines.append(markdown_table(t["int8_vs_fp32"], [
        ("model", "model"), ("batch", "batch"), ("threads", "threads"), ("fp32_ms", "fp32 ms"),
        ("int8_ms", "int8 ms"), ("speedup", "speed-up"), ("accuracy_loss_points", "accuracy lost (points)"),
        ("int8_argmax_agreement", "int8 argmax agreement"), ("met", "met")]))
    r50 = t.get("resnet50_pct_peak")
    int8 = (f" For comparison, int8 ({r50['best_int8_runtime']}) does the same work at "
            f"{r50['best_int8_pct_peak']:.0f}% of the fp32 peak." if r50 and r50.get("best_int8_runtime") else "")
    lines.append(f"**resnet50 inference, best fp32 runtime (target >= {TARGET_PCT_PEAK:g}% of peak)**: "
                 + (f"batch {r50['batch']}, {r50['best_runtime']}: {r50['gflops']:.0f} GFLOP/s = "
                    f"**{r50['pct_peak']:.1f}%** of peak ({'met' if r50['met'] else 'missed'}).{int8}\n"
                    if r50 else "not measured.\n"))
    lines.append("**Peers: Keras's own `model.export(format=...)` in the same runner and threads**\n")
    lines.append(markdown_table(t["peers"], [
        ("model", "model"), ("peer", "peer"), ("batch", "batch"), ("threads", "threads"), ("peer_status", "peer"),
        ("peer_ms", "peer ms"), ("ours_ms", "ours ms"), ("speed_ratio", "peer/ours"),
        ("peer_accuracy", "peer acc"), ("ours_accuracy", "ours acc"), ("faster", "ours as fast"),
        ("as_accurate", "ours as accurate"), ("peer_error", "peer error")]))
    return "\n".join(lines)


def _profile_markdown(p: dict, peak: float) -> str:
    lines = [f"## Profile: {p['model']} at batch {p['batch']}\n"]
    if p.get("summary"):  # why there is no profile
        lines.append(p["summary"] + "\n")
    if p.get("ops"):
        conv = p.get("conv_gflops") or 0
        lines.append(
            f"{p['tool']}: {p['call_ms']:.0f} ms per call, {p['overall_gflops']:.0f} GFLOP/s = "
            f"{100 * p['overall_gflops'] / peak:.0f}% of the {peak:.0f} GFLOP/s matmul peak. Convolutions take "
            f"{100 * (p.get('conv_share') or 0):.0f}% of kernel time at {conv:.0f} GFLOP/s ({100 * conv / peak:.0f}% "
            f"of peak); the rest is element-wise, pooling and layout work.\n")
        ops = [dict(o, pct_peak=round(100 * o["gflops"] / peak, 1) if o.get("gflops") else None) for o in p["ops"]]
        lines.append(markdown_table(ops, [("op_type", "op type"), ("ms", "ms per batch"), ("share", "share"),
                                          ("gflops", "GFLOP/s"), ("pct_peak", "% peak")]))
    if p.get("tf_ops"):
        where = f"; trace in `{p['tf_trace_dir']}`" if p.get("tf_trace_dir") else ""
        lines.append(f"TensorFlow profiler (`tf.profiler.experimental`, eager Keras `model(x)`{where}), "
                     f"time per call by op type:\n")
        lines.append(markdown_table(p["tf_ops"], [("op_type", "TF op"), ("ms", "ms per batch"), ("share", "share")]))
    if p.get("next_lever"):
        lines.append(f"Next lever: {p['next_lever']}\n")
    return "\n".join(lines)


# --- files -----------------------------------------------------------------------------------------


def write_csv(result: dict, path: Path) -> Path:
    keys = ["model", "runtime", "threads", "batch", "status", "median_ms", "p90_ms", "reps", "throughput_per_s",
            "gflops", "pct_peak", "accuracy", "keras_accuracy", "max_abs_diff", "argmax_agreement", "parity_ok",
            "precision", "route", "peer", "note", "error"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(result["rows"])
    return path


def plots(result: dict, folder) -> list[Path]:
    """inference.csv and three PNGs: latency per format (batch 1), throughput vs batch, % of peak."""
    from benchmarks.common import pyplot, save_figure

    plt = pyplot()

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [write_csv(result, folder / "inference.csv")]
    models = list(result["models"])
    rows = [r for r in result["rows"] if r.get("status") == "ok"]
    labels = list(dict.fromkeys(_label(r) for r in rows))
    if not rows:
        return paths
    colors = {label: plt.cm.tab20(i % 20) for i, label in enumerate(labels)}
    small = min(result["settings"]["batch_sizes"])
    big = max(result["settings"]["batch_sizes"])

    def grouped(ax, batch, key, ylabel, log):
        width = 0.8 / max(1, len(labels))
        for j, label in enumerate(labels):
            xs, ys = [], []
            for i, model in enumerate(models):
                hit = [r for r in rows if r["model"] == model and r["batch"] == batch and _label(r) == label]
                if hit:
                    xs.append(i + (j - len(labels) / 2) * width + width / 2)
                    ys.append(hit[0][key])
            ax.bar(xs, ys, width, label=label, color=colors[label])
        ax.set_xticks(range(len(models)), models)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)

    fig, ax = plt.subplots(figsize=(max(9, 2.4 * len(models)), 6))
    grouped(ax, small, "median_ms", f"median latency at batch {small} (ms, log)", True)
    ax.set_title(f"Latency per format, batch {small}")
    ax.legend(fontsize=7, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    paths.append(folder / "inference_latency.png")
    save_figure(fig, paths[-1], dpi=110)

    cols = min(3, len(models))
    nrows = -(-len(models) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.5 * cols, 3.6 * nrows), squeeze=False)
    for ax, model in zip(axes.flat, models):
        for label in labels:
            pts = sorted((r["batch"], r["throughput_per_s"]) for r in rows if r["model"] == model and _label(r) == label)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=label, color=colors[label])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(model)
        ax.set_xlabel("batch size")
        ax.set_ylabel("examples / s")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(models):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    fig.suptitle("Throughput against batch size")
    paths.append(folder / "inference_throughput.png")
    save_figure(fig, paths[-1], dpi=110)

    fig, ax = plt.subplots(figsize=(max(9, 2.4 * len(models)), 6))
    grouped(ax, big, "pct_peak", f"% of fp32 matmul peak at batch {big}", False)
    ax.axhline(TARGET_PCT_PEAK, color="k", ls="--", lw=1)
    ax.set_title(f"Efficiency: achieved GFLOP/s as % of the {result['peak']['gflops']:.0f} GFLOP/s matmul peak")
    ax.legend(fontsize=7, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    paths.append(folder / "inference_efficiency.png")
    save_figure(fig, paths[-1], dpi=110)
    return paths
