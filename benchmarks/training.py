"""Training speed: zoo's `fit` against plain Keras `fit`, the input pipeline, a PyTorch peer.

For each family's reference recipe (CNN `mnist_fast`, MLP `mnist_mlp`, RNN
`mnist_lstm`) the suite builds the recipe's model twice from the same seed:
the zoo model (`ZooModel`, compiled by `zoo.training.builders.build_and_compile`
with its train_step features) and a plain `keras.Model` over the same layer
graph, compiled with the same optimizer settings (Keras's own optimizer; zoo's
is the fused one), loss, metrics and `jit_compile`. Both
train on the same batches of the recipe's own tf.data pipeline, cached in
memory so that I/O does not decide the result, and start from identical
weights: the first (untimed, tracing) `fit` of each doubles as a parity check
(same loss after the same steps). Then timed `fit`s alternate zoo, keras,
keras, zoo, ... (ABBA), so drift on a shared machine cancels; the result is the
median samples/s and the per-round zoo/keras ratio (median, min, max).

Variants: float32 without XLA (the zoo default on CPU), with XLA
(`jit_compile=True`), and the mixed-precision policies (`mixed_bfloat16`;
`mixed_float16` where asked).

Per model on synthetic data (`benchmarks.model_efficiency`): convnet_bn,
resnet20 and MobileNetV2 at CIFAR shape, the LSTM and the MLP, each against
the same model in stock Keras (keras.applications' MobileNetV2), with % of
the fp32 peak and the profiler's top ops.

Also measured: the training input pipeline alone (samples/s iterating the
dataset with no model) against the fastest consumption rate, the PyTorch peer
(`benchmarks.torch_peer`), achieved GFLOP/s against the machine's matmul
peak (`benchmarks.flops`, `benchmarks.peak`), and optionally time to
accuracy (`benchmarks.time_to_accuracy`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

import zoo.data
from benchmarks import input_pipeline, model_efficiency
from benchmarks.common import machine, markdown_table, system_load
from benchmarks.fit_timing import Settings, interleaved_rates, parity_fits, timed_fit
from zoo.architectures import registry
from zoo.architectures.stock import stock_keras_model
from zoo.training import features
from zoo.training.builders import build_and_compile, load_splits, make_optimizer
from zoo.training.config import load_recipe
from zoo.training.tasks import get_task

# Family -> its reference recipe.
FAMILIES = {"cnn": "mnist_fast", "mlp": "mnist_mlp", "rnn": "mnist_lstm"}
# Variant -> (jit_compile, mixed precision policy).
VARIANTS = {
    "fp32": (False, None),
    "fp32+xla": (True, None),
    "bf16": (False, "mixed_bfloat16"),
    "bf16+xla": (True, "mixed_bfloat16"),
    "fp16": (False, "mixed_float16"),
}
DEFAULT_VARIANTS = ("fp32", "fp32+xla", "bf16")
TARGET_RATIO = 1.0
# The twin's stock BatchNormalization rounds differently from the fused kernel: after a few steps the
# losses agree to ~1e-4, not bit for bit (tests/architectures/test_cnn_reference.py checks the step itself).
PARITY_TOLERANCE = 1e-3


def add_arguments(parser) -> None:
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES),
                        help="model families to measure (each with its reference recipe)")
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=list(VARIANTS),
                        help="precision/XLA variants")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per fit, at most (default 200; 12 with --quick)")
    parser.add_argument("--rounds", type=int, default=None, help="ABBA rounds (default 7; 1 with --quick)")
    parser.add_argument("--models", nargs="*", default=list(model_efficiency.CASES),
                        choices=list(model_efficiency.CASES),
                        help="models trained on synthetic data against stock Keras, with %% of peak and top ops "
                             "(default: all; none: skip)")
    parser.add_argument("--pipelines", nargs="*", default=list(input_pipeline.SOURCES),
                        choices=list(input_pipeline.SOURCES),
                        help="input sources timed from their first epoch against the model they feed (none: skip)")
    parser.add_argument("--efficiency-batch", type=int, default=32,
                        help="batch size of the extra CNN run whose GFLOP/s is compared with the peak (0: skip)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch peer")
    parser.add_argument("--time-to-accuracy", action="store_true",
                        help="also run the time-to-accuracy benchmark (minutes)")
    parser.add_argument("--tta-seeds", type=int, nargs="+", default=[0], help="seeds for --time-to-accuracy")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="also profile 20 zoo CNN train steps: a TensorBoard profiler trace and a cProfile "
                             "summary in DIR")
    parser.add_argument("--quick", action="store_true", help="a smoke test: few steps, one round, fp32 only")
    parser.add_argument("--seed", type=int, default=0)


def run(args) -> dict:
    settings = Settings()
    if getattr(args, "quick", False):
        settings = Settings(steps=12, warmup_steps=2, rounds=1, parity_steps=3, fit_budget_s=0.5, min_steps=4)
    settings.steps = args.steps or settings.steps
    settings.rounds = args.rounds or settings.rounds
    variants = ["fp32"] if getattr(args, "quick", False) and args.variants == list(DEFAULT_VARIANTS) else args.variants
    peak = _peak()
    result = {"benchmark": "training", "machine": machine(), "load_before": system_load(),
              "settings": dataclasses.asdict(settings), "peak": peak, "throughput": [], "models": [],
              "pipeline": [], "torch": None, "time_to_accuracy": None}
    for name in getattr(args, "models", None) or ():
        print(f"[training] {name} on synthetic data against stock Keras", flush=True)
        row = model_efficiency.measure(name, settings, peak, seed=args.seed)
        result["models"].append(row)
        print(f"  {model_efficiency.row_text(row)}", flush=True)
    for family in args.families:
        recipe = FAMILIES[family]
        for variant in variants:
            print(f"[training] {family} ({recipe}) {variant}", flush=True)
            row = compare_fit(recipe, variant, settings, seed=args.seed)
            row["family"] = family
            _add_efficiency(row, peak)
            result["throughput"].append(row)
            _print_row(row)
    if getattr(args, "pipelines", None):
        result["pipeline"] = input_pipeline.run_all(args.pipelines, seed=args.seed)
    if "cnn" in args.families and args.efficiency_batch:
        print(f"[training] cnn fp32 at batch {args.efficiency_batch} (efficiency)", flush=True)
        row = compare_fit(FAMILIES["cnn"], "fp32", settings, seed=args.seed, batch_size=args.efficiency_batch)
        row["family"] = "cnn"
        row["purpose"] = "efficiency"
        _add_efficiency(row, peak)
        result["throughput"].append(row)
        _print_row(row)
    if "cnn" in args.families and not args.no_torch:
        from benchmarks import torch_peer

        cnn = next((r for r in result["throughput"] if r["family"] == "cnn" and r["variant"] == "fp32"
                    and r.get("purpose") != "efficiency"), None)
        print("[training] PyTorch peer", flush=True)
        result["torch"] = torch_peer.run(recipe_config(FAMILIES["cnn"], "fp32", args.seed), settings,
                                         zoo_samples_per_s=cnn["zoo_samples_per_s"] if cnn else None)
    if getattr(args, "profile", None):
        print(f"[training] profiling zoo's CNN train step into {args.profile}", flush=True)
        result["profile"] = profile_steps(FAMILIES["cnn"], "fp32", args.profile, seed=args.seed)
    if getattr(args, "time_to_accuracy", False):
        from benchmarks import time_to_accuracy

        result["time_to_accuracy"] = time_to_accuracy.run_seeds(seeds=args.tta_seeds)
    result["load_after"] = system_load()
    return result


# -- zoo fit against keras fit --------------------------------------------------------------------


def recipe_config(recipe: str, variant: str, seed: int = 0, **overrides):
    """The recipe's TrainConfig with the variant's XLA and precision settings."""
    jit, policy = VARIANTS[variant]
    return load_recipe(recipe, seed=seed, export_dir=None, jit_compile=jit, mixed_precision=policy, **overrides)


def cached_batches(config, steps: int) -> tf.data.Dataset:
    """`steps` batches of the recipe's training pipeline, held in memory and repeated.

    The batches are materialised first, so every `fit` (of either model) sees
    the same batches in the same order: a partly filled `cache()` would
    re-read the reshuffled source instead.
    """
    batches = list(load_splits(config)[0].take(steps))
    stacked = tuple(tf.stack([b[i] for b in batches]) for i in range(len(batches[0])))
    return tf.data.Dataset.from_tensor_slices(stacked).repeat().prefetch(tf.data.AUTOTUNE)


def build_pair(config, steps_per_epoch: int):
    """(zoo model, plain keras model): the same architecture and initial weights, the plain one built
    from stock Keras layers (`stock_keras_model`) and compiled with Keras's own optimizer, both with the
    same settings."""
    info = zoo.data.dataset_info(config.dataset)
    keras.utils.set_random_seed(config.seed)
    zoo_model = build_and_compile(config, info.input_shape, info.output_units, steps_per_epoch)
    # The same seed again: identical dropout seed generators in the twin.
    keras.utils.set_random_seed(config.seed)
    with features.policy_scope(config.mixed_precision):
        plain = stock_keras_model(zoo_model)
    task = get_task(registry.get_spec(config.model).task)
    plain.compile(optimizer=make_optimizer(config, steps_per_epoch, stock=True), loss=task.loss(),
                  metrics=task.metrics(), jit_compile=zoo_model.jit_compile)
    return zoo_model, plain


def compare_fit(recipe: str, variant: str, settings: Settings, seed: int = 0, batch_size: int | None = None) -> dict:
    """zoo fit against plain Keras fit for one recipe and variant; see the module docstring."""
    overrides = {"batch_size": batch_size} if batch_size else {}
    config = recipe_config(recipe, variant, seed, **overrides)
    row = {"recipe": recipe, "model": config.model, "variant": variant, "batch_size": config.batch_size,
           "jit_compile": VARIANTS[variant][0], "mixed_precision": VARIANTS[variant][1]}
    ds = cached_batches(config, settings.warmup_steps + settings.steps)
    steps_per_epoch = int(load_splits(config)[0].cardinality())
    try:
        zoo_model, plain = build_pair(config, steps_per_epoch)
        row["params"] = zoo_model.count_params()
        row["identical_initial_weights"] = all(
            np.array_equal(a, b) for a, b in zip(zoo_model.get_weights(), plain.get_weights()))
        row["parity"], rate = parity_fits(zoo_model, plain, ds, settings.parity_steps)
        steps = max(settings.min_steps, min(settings.steps, int(settings.fit_budget_s * rate)))
        row["timed_steps_per_fit"] = steps
        runs = interleaved_rates(zoo_model, plain, ds, batch_size=config.batch_size, steps=steps,
                                 warmup_steps=settings.warmup_steps, rounds=settings.rounds)
    except Exception as e:  # e.g. a policy or XLA op that this machine's kernels lack
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        return row
    row.update(runs.summary())
    row["ratio_target"] = TARGET_RATIO
    row["passed"] = row["ratio"] >= TARGET_RATIO
    row["forward_flops_per_sample"] = _forward_flops(zoo_model, config)
    return row


def _print_row(row: dict) -> None:
    if "error" in row:
        print(f"  failed: {row['error']}", flush=True)
        return
    print(f"  zoo {row['zoo_samples_per_s']:.0f} samples/s, keras {row['keras_samples_per_s']:.0f} samples/s, "
          f"ratio {row['ratio']:.3f} [{row['ratio_min']:.3f}, {row['ratio_max']:.3f}], "
          f"per CPU-second {row['cpu_ratio']:.3f} [{row['cpu_ratio_min']:.3f}, {row['cpu_ratio_max']:.3f}], "
          f"parity |dloss|={row['parity']['abs_diff']:.2e}"
          + (f", {row['train_gflops']:.1f} GFLOP/s" if row.get("train_gflops") else ""), flush=True)


def profile_steps(recipe: str, variant: str, folder, steps: int = 20, seed: int = 0) -> dict:
    """A TensorBoard profiler trace (op-level, open with TensorBoard's Profile tab) and a cProfile of the
    host-side Python of `steps` zoo train steps; returns the paths and the top host functions.

    See https://www.tensorflow.org/guide/profiler (tf.profiler.experimental.start/stop).
    """
    import cProfile
    import io
    import pstats

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = recipe_config(recipe, variant, seed)
    ds = cached_batches(config, steps)
    zoo_model, _ = build_pair(config, steps_per_epoch=steps)
    timed_fit(zoo_model, ds, 3, 2)  # trace outside the profile
    tf.profiler.experimental.start(str(folder / "tensorboard"))
    try:
        timed_fit(zoo_model, ds, steps - 2, 2)
    finally:
        tf.profiler.experimental.stop()
    profiler = cProfile.Profile()
    profiler.enable()
    timed_fit(zoo_model, ds, steps - 2, 2)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    (folder / "cprofile.txt").write_text(text.getvalue())
    return {"recipe": recipe, "variant": variant, "steps": steps, "tensorboard_logdir": str(folder / "tensorboard"),
            "cprofile": str(folder / "cprofile.txt"),
            "top_ops": op_summary(folder / "tensorboard")}


def op_summary(logdir, top: int = 15) -> list[dict] | None:
    """Per (layer, op) CPU time of the compiled train step from the newest profiler trace under
    `logdir`, largest first (the executor's `tf_Compute` threads); None where there is no trace."""
    import collections
    import re

    from benchmarks.profile import xplane_events

    totals = collections.Counter()
    for line, name, ms in xplane_events(logdir):
        parts = name.split("/")
        if not line.startswith("tf_Compute") or len(parts) < 2:  # executor bookkeeping, not an op
            continue
        layer = next((p for p in parts if re.match(r"(stage|block|head|predictions|dense|lstm)", p)), "other")
        totals[(re.sub(r"_\d+$", "", layer), parts[-1].split(":")[0])] += ms
    if not totals:
        return None
    total = sum(totals.values())
    return [{"layer": layer, "op": op, "ms": round(ms, 1), "percent": round(100 * ms / total, 1)}
            for (layer, op), ms in totals.most_common(top)]


# -- efficiency -----------------------------------------------------------------------------------


def _forward_flops(model, config) -> int | None:
    try:
        from benchmarks.flops import forward_flops
    except ImportError:
        return None
    try:
        return int(forward_flops(model))
    except Exception as e:  # counting is best effort; the timing stands without it
        print(f"  (FLOP count failed: {type(e).__name__}: {e})", flush=True)
        return None


def _peak() -> dict | None:
    try:
        from benchmarks.peak import matmul_peak_gflops
    except ImportError:
        return None
    try:
        return matmul_peak_gflops()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def peak_gflops(peak: dict | None) -> float | None:
    """The machine's float32 matmul peak from `benchmarks.peak`, whatever its key is called."""
    if not peak:
        return None
    for key in ("peak_gflops", "gflops", "gflops_per_s", "float32_gflops"):
        if isinstance(peak.get(key), (int, float)):
            return float(peak[key])
    numbers = [v for k, v in peak.items() if "gflop" in k.lower() and isinstance(v, (int, float))]
    return float(max(numbers)) if numbers else None


def _add_efficiency(row: dict, peak: dict | None) -> None:
    """Training costs about 3x the forward FLOPs (forward, then gradients for inputs and weights)."""
    flops = row.get("forward_flops_per_sample")
    if not flops or not row.get("zoo_samples_per_s"):
        return
    row["train_gflops"] = round(3 * flops * row["zoo_samples_per_s"] / 1e9, 2)
    top = peak_gflops(peak)
    if top:
        row["percent_of_peak"] = round(100 * row["train_gflops"] / top, 1)


# -- report ---------------------------------------------------------------------------------------


def markdown(result: dict) -> str:
    m = result["machine"]
    out = [f"# Training benchmark\n\n{m['cpus']} CPUs ({m['cpu_model']}), TensorFlow {m['tensorflow']}, "
           f"Keras {m['keras']}. zoo `fit` and plain Keras `fit` of the same model, weights, optimizer and "
           f"cached batches, alternated (ABBA) in one process; samples/s are medians over "
           f"{result['settings']['rounds']} rounds of up to {result['settings']['steps']} steps (fewer where a "
           f"step is slow). The per-CPU-second ratio (samples per CPU-second of the process) measures the "
           f"step's cost independently of other load on the machine.\n"]
    flags = ", ".join(m.get("cpu_flags") or []) or "unknown"
    loads = [result.get(k) for k in ("load_before", "load_after") if result.get(k)]
    if loads:
        shared = max(l["load_1m"] for l in loads) > loads[0]["cpus"]
        verdict = ("above the CPU count, other processes shared the cores, so absolute rates are low and the "
                   "interleaved ratios are the figures to read" if shared else
                   "not above the CPU count (the benchmark's own threads): a quiet machine, so wall-clock rates "
                   "and % of peak by wall time can be read too")
        out.append(f"\nCPU flags: {flags}. Load average (1 min) {' -> '.join(str(l['load_1m']) for l in loads)} "
                   f"on {loads[0]['cpus']} CPUs: {verdict}.\n")
    out.append("\n## Targets\n")
    out.append(markdown_table(targets(result), [("target", "target"), ("value", "measured"),
                                                ("passed", "met")]))
    if result.get("models"):
        out.append("\n## Per model: zoo fit against stock Keras fit, % of peak\n\n")
        out.append(model_efficiency.markdown(result["models"], result.get("peak")))
    out.append("\n## zoo fit against Keras fit (recipes, real data)\n")
    rows = [dict(r, ratio_range=f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f}",
                 cpu_range=f"{r['cpu_ratio']:.3f} ({r['cpu_ratio_min']:.3f}-{r['cpu_ratio_max']:.3f})")
            if "ratio" in r else r for r in result["throughput"]]
    out.append(markdown_table(rows, [
        ("family", "family"), ("model", "model"), ("variant", "variant"), ("batch_size", "batch"),
        ("zoo_samples_per_s", "zoo samples/s"), ("keras_samples_per_s", "Keras samples/s"),
        ("ratio", "zoo/Keras"), ("ratio_range", "range"), ("cpu_range", "zoo/Keras per CPU-s"),
        ("train_gflops", "GFLOP/s"),
        ("percent_of_peak", "% of peak"), ("error", "error")]))
    top = peak_gflops(result.get("peak"))
    if top:
        out.append(f"\nPeak: {top:.0f} GFLOP/s (float32 matmul, `benchmarks.peak`); training FLOPs are "
                   f"taken as 3x the forward FLOPs.\n")
    if result["pipeline"]:
        out.append("\n## Input pipelines from the first epoch\n\n")
        out.append(input_pipeline.__doc__.split("\n\n", 1)[1].strip() + "\n\n")
        out.append(input_pipeline.markdown(result["pipeline"]))
    t = result.get("torch")
    if t:
        out.append("\n## PyTorch peer\n")
        if t.get("skipped"):
            out.append(f"Skipped: {t['skipped']}\n")
        else:
            out.append(markdown_table([t], [
                ("torch", "torch"), ("threads", "threads"), ("memory_format", "layout"),
                ("samples_per_s", "torch samples/s"), ("zoo_samples_per_s", "zoo samples/s"),
                ("ratio", "zoo/torch"), ("params", "params")]))
    prof = result.get("profile")
    if prof and prof.get("top_ops"):
        out.append(f"\n## Where the time goes: zoo {prof['recipe']} {prof['variant']} train step\n\n"
                   f"TensorFlow profiler, {prof['steps']} steps (trace: `{prof['tensorboard_logdir']}`; host-side "
                   f"cProfile: `{prof['cprofile']}`). CPU time per layer and op, largest first:\n\n")
        out.append(markdown_table(prof["top_ops"], [("layer", "layer"), ("op", "op"), ("ms", "ms"),
                                                    ("percent", "% of op time")]))
    if result.get("time_to_accuracy"):
        from benchmarks import time_to_accuracy

        out.append("\n" + time_to_accuracy.markdown(result["time_to_accuracy"]).replace("# ", "## ", 1))
    return "".join(out)


def targets(result: dict) -> list[dict]:
    rows = []
    for r in result["throughput"]:
        if "ratio" in r:
            rows.append({"target": f"zoo/Keras fit, {r['family']} {r['variant']} batch {r['batch_size']} >= 1.0",
                         "value": f"{r['ratio']:.3f} ({r['ratio_min']:.3f}-{r['ratio_max']:.3f}); "
                                  f"per CPU-second {r['cpu_ratio']:.3f}"
                                  + ("; the range covers 1.0 (noise)" if not r["passed"] and r["ratio_max"] >= 1.0
                                     else ""),
                         "passed": r["passed"]})
    for r in result.get("models", []):
        if "ratio" not in r:
            continue
        rows.append({"target": f"zoo/Keras fit, {r['model']} batch {r['batch_size']} >= {r['ratio_target']} "
                               f"(per CPU-second)",
                     "value": f"{r['cpu_ratio']:.3f} ({r['cpu_ratio_min']:.3f}-{r['cpu_ratio_max']:.3f}); wall "
                              f"{r['ratio']:.3f} ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})"
                              + ("; the range covers the target (noise)"
                                 if not r["passed_ratio"] and r["cpu_ratio_max"] >= r["ratio_target"] else ""),
                     "passed": r["passed_ratio"]})
        if r.get("peak_target"):
            rows.append({"target": f"{r['model']} training >= {r['peak_target']:.0f}% of fp32 peak (per CPU-second)",
                         "value": f"{r.get('percent_of_peak_per_cpu_s')}%; by wall time {r.get('percent_of_peak')}%",
                         "passed": r.get("passed_peak")})
    for p in result["pipeline"]:
        rows.append({"target": f"first-epoch input pipeline headroom, {p['source']} >= {p['target']:g}x",
                     "value": f"{p['headroom']:.1f}x", "passed": p["passed"]})
    t = result.get("torch")
    if t and not t.get("skipped"):
        rows.append({"target": "zoo/PyTorch training step, convnet_bn (reported)", "value": f"{t['ratio']:.2f}",
                     "passed": None})
    tta = result.get("time_to_accuracy")
    if tta:
        rows.append({"target": f"time to {tta['target_test_accuracy']:.1%}: >= {tta.get('target_speedup')}x keras.io",
                     "value": f"{tta.get('worst_speedup')}x (worst of seeds {tta['seeds']})", "passed": tta.get("passed")})
    return rows


def plots(result: dict, folder) -> list[Path]:
    from benchmarks.common import pyplot, save_figure

    plt = pyplot()

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [r for r in result["throughput"] if "ratio" in r]
    paths = []
    if rows:
        labels = [f"{r['family']}\n{r['variant']}\nb{r['batch_size']}" for r in rows]
        torch_row = result.get("torch") or {}
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(rows)), 4))
        x = np.arange(len(rows))
        width = 0.28
        ax.bar(x - width, [r["zoo_samples_per_s"] for r in rows], width, label="zoo fit")
        ax.bar(x, [r["keras_samples_per_s"] for r in rows], width, label="Keras fit")
        torch_rate = [torch_row.get("samples_per_s") if r["family"] == "cnn" and r["variant"] == "fp32"
                      and r["batch_size"] == torch_row.get("batch_size") else 0 for r in rows]
        if any(torch_rate):
            ax.bar(x + width, [v or 0 for v in torch_rate], width, label=f"PyTorch {torch_row.get('torch')} eager")
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_ylabel("training samples/s")
        ax.set_yscale("log")
        ax.set_title("Training throughput per family and variant")
        ax.legend()
        path = folder / "training_throughput.png"
        save_figure(fig, path, dpi=120)
        paths.append(path)
    if result.get("time_to_accuracy"):
        from benchmarks import time_to_accuracy

        paths += time_to_accuracy.plots(result["time_to_accuracy"], folder, stem="training_time_to_accuracy")
    return paths

