"""Training efficiency per model: zoo `fit` against the same model in stock Keras, and % of peak.

For each model (CIFAR-shaped images for the CNNs, MNIST rows for the LSTM,
synthetic data so that no input pipeline is measured):

- the zoo model, compiled by `zoo.training.run.build_and_compile` (zoo's
  layers, e.g. the fused BatchNormalization, and its train step);
- the baseline a plain-Keras user would train: the `keras.applications`
  model zoo's is weight-compatible with (the registry's `keras_twin`, e.g.
  MobileNetV2), else the same graph rebuilt from stock
  Keras layers (`zoo.architectures.stock.stock_keras_model`), both a plain
  `keras.Model` compiled with Keras's own optimizer of the same settings
  (zoo's is the fused one of `zoo.core.fused_optimizers`), the same loss
  and metrics, and loaded with the same weights;
- timed `fit`s alternated ABBA (`benchmarks.fit_timing`);
- achieved training GFLOP/s (3x the forward FLOPs of `benchmarks.flops`)
  against the machine's fp32 matmul peak measured in the same run
  (`benchmarks.peak`), by wall time and per CPU-second;
- the TensorFlow profiler's top op types of the zoo step
  (`benchmarks.profile.compiled_op_summary`);
- for a case with a % of peak target, the ceiling its convolutions set when
  timed alone (`benchmarks.conv_ceiling`).

A case may be a variant of a registered model (`model` names it, `overrides`
sets builder options): `convnet_bn_32_64_64` is convnet_bn at twice its
default width in every stage, reported beside the default to show how much
of the gap to the peak is the width. The default's 16-32 channels are sized
for MNIST; at CIFAR shape their batch norm, ReLU and pooling passes over
4-17 MB activations cost nearly as much as the convolutions (README, Speed).

A case that names a recipe takes that recipe's `RECIPE_KNOBS`: its model
options (the LSTM's recipe unrolls the time loop, in the baseline too, the
same graph), its `steps_per_execution` (the zoo model's) and its
`intra_op_threads` (`zoo.training.thread_pools`; the LSTM's recipe runs
each small op on one core). TensorFlow fixes its thread pools per process,
so such a row is measured in a fresh Python process, zoo and Keras alike,
and the row says which pool it ran with.

Targets are judged per CPU-second (zoo/Keras samples per CPU-second of the
process; training FLOPs per CPU-second against the matmul's FLOPs per
CPU-second): on a machine shared with other work (load average above the
CPU count) wall-clock rates move with the load from one fit to the next,
and the peak matmul, timed once, meets a different load than the models,
so wall-clock ratios and percentages are reported beside but not judged.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from benchmarks.common import child_env
from benchmarks.conv_ceiling import conv_ceiling
from benchmarks.fit_timing import Settings, interleaved_rates, parity_fits, timed_fit
from zoo.architectures import registry
from zoo.architectures.stock import stock_keras_model
from zoo.training.builders import build_and_compile, make_optimizer
from zoo.training.config import TrainConfig
from zoo.training.tasks import get_task

NUM_CLASSES = 10
DISTINCT_BATCHES = 8


@dataclasses.dataclass(frozen=True)
class ModelCase:
    """One row: the model, its input, batch size and targets (% of fp32 peak, zoo/Keras ratio)."""

    input_shape: tuple
    batch_size: int
    peak_target: float | None = None  # % of the fp32 matmul peak, by wall time
    ratio_target: float = 1.0  # zoo/Keras samples/s; 1.0 means "no regression"
    recipe: str | None = None  # the recipe whose settings (RECIPE_KNOBS) the row takes
    model: str | None = None  # the registry name, where the row's is a variant's (default: the row's name)
    overrides: tuple = ()  # the variant's builder options, (name, value) pairs, over the recipe's

    def runtime(self) -> dict:
        """The recipe's `RECIPE_KNOBS`; without a recipe, the registry's, TensorFlow's and Keras's defaults.
        A variant's `overrides` go over the recipe's model options."""
        from zoo.training.config import TrainConfig, load_recipe

        config = load_recipe(self.recipe) if self.recipe else TrainConfig()
        knobs = {knob: getattr(config, knob) for knob in RECIPE_KNOBS}
        if self.overrides:
            knobs["model_overrides"] = {**(knobs["model_overrides"] or {}), **dict(self.overrides)}
        return knobs


# What a case takes from its recipe: the model's builder options (the stock baseline is a clone, so
# it has them too), and settings that change how fast a step runs, not what it computes. The
# intra-op pool is the process's, so it holds for the Keras baseline too; steps_per_execution is the
# zoo model's compile setting (the baseline keeps Keras's default, one step per call).
RECIPE_KNOBS = ("model_overrides", "intra_op_threads", "steps_per_execution")


CASES = {
    "convnet_bn": ModelCase((32, 32, 3), 256, peak_target=50.0),
    "convnet_bn_32_64_64": ModelCase((32, 32, 3), 256, model="convnet_bn", overrides=(("filters", (32, 64, 64)),)),
    "resnet20": ModelCase((32, 32, 3), 128, peak_target=50.0, ratio_target=1.3),
    "mobilenet_v2": ModelCase((32, 32, 3), 128, ratio_target=1.3),
    "lstm_classifier": ModelCase((28, 28), 128, peak_target=40.0, recipe="mnist_lstm"),
    "mlp": ModelCase((28, 28, 1), 128),
}


def synthetic_batches(input_shape, batch_size: int, seed: int = 0) -> tf.data.Dataset:
    """`DISTINCT_BATCHES` batches of uniform [0, 1) inputs and random labels, in memory, repeated."""
    rng = np.random.default_rng(seed)
    n = DISTINCT_BATCHES * batch_size
    x = rng.random((n, *input_shape), dtype=np.float32)
    y = rng.integers(0, NUM_CLASSES, n).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).cache().repeat().prefetch(2)


def build_pair(name: str, case: ModelCase, seed: int = 0, jit_compile: bool = False):
    """(zoo model, plain Keras baseline): same weights, loss, metrics and optimizer settings (Keras's own
    optimizer in the baseline)."""
    runtime = case.runtime()
    config = TrainConfig(model=name, optimizer="adamw", lr=1e-3, schedule="constant", seed=seed,
                         jit_compile=jit_compile, export_dir=None,
                         steps_per_execution=runtime["steps_per_execution"], model_overrides=runtime["model_overrides"])
    keras.utils.set_random_seed(seed)
    zoo_model = build_and_compile(config, case.input_shape, NUM_CLASSES, steps_per_epoch=None)
    keras.utils.set_random_seed(seed)  # the same dropout seeds in the baseline
    twin = registry.get_spec(name).keras_twin
    if twin is not None:  # the keras.applications model zoo's is weight-compatible with
        application = getattr(keras.applications, twin.application)
        plain = application(weights=None, input_shape=case.input_shape, classes=NUM_CLASSES)
        plain.set_weights(zoo_model.get_weights())
    else:
        plain = stock_keras_model(zoo_model)
    task = get_task(registry.get_spec(name).task)
    plain.compile(optimizer=make_optimizer(config, None, stock=True), loss=task.loss(), metrics=task.metrics(),
                  jit_compile=jit_compile)
    return zoo_model, plain


def measure(name: str, settings, peak: dict | None, seed: int = 0, profile_steps: int = 10) -> dict:
    """One model's row: zoo against Keras (ABBA), GFLOP/s and % of `peak` (`benchmarks.peak`'s result)
    by wall time and per CPU-second, the profile's top ops."""
    from benchmarks.flops import forward_flops
    from benchmarks.profile import compiled_op_summary

    case = CASES[name]
    model_name = case.model or name
    runtime = case.runtime()
    threads = runtime["intra_op_threads"]
    if threads is not None and tf.config.threading.get_intra_op_parallelism_threads() != threads:
        return measure_in_fresh_process(name, settings, peak, seed, profile_steps, threads)
    row = {"model": name, "input_shape": list(case.input_shape), "batch_size": case.batch_size,
           "peak_target": case.peak_target, "ratio_target": case.ratio_target,
           "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads() or None,
           "steps_per_execution": runtime["steps_per_execution"],
           "model_overrides": runtime["model_overrides"],
           "baseline": (f"keras.applications.{registry.get_spec(model_name).keras_twin.application}"
                        if registry.get_spec(model_name).keras_twin else "stock Keras layers")}
    ds = synthetic_batches(case.input_shape, case.batch_size, seed)
    zoo_model, plain = build_pair(model_name, case, seed)
    row["params"] = zoo_model.count_params()
    row["identical_initial_weights"] = all(
        np.array_equal(a, b) for a, b in zip(zoo_model.get_weights(), plain.get_weights()))
    row["parity"], rate = parity_fits(zoo_model, plain, ds, settings.parity_steps)
    steps = max(settings.min_steps, min(settings.steps, int(settings.fit_budget_s * rate)))
    row["timed_steps_per_fit"] = steps
    runs = interleaved_rates(zoo_model, plain, ds, batch_size=case.batch_size, steps=steps,
                             warmup_steps=settings.warmup_steps, rounds=settings.rounds)
    row.update(runs.summary())
    row["passed_ratio"] = row["cpu_ratio"] >= case.ratio_target
    flops = forward_flops(zoo_model)
    row["forward_mflops_per_sample"] = round(flops / 1e6, 3)
    row["train_gflops"] = round(3 * flops * row["zoo_samples_per_s"] / 1e9, 1)
    row["train_gflops_per_cpu_s"] = round(3 * flops * row["zoo_samples_per_cpu_s"] / 1e9, 1)
    peak = peak if isinstance(peak, dict) and "gflops" in peak else {}
    if peak.get("gflops"):
        row["percent_of_peak"] = round(100 * row["train_gflops"] / peak["gflops"], 1)
    if peak.get("gflops_per_cpu_s"):
        row["percent_of_peak_per_cpu_s"] = round(100 * row["train_gflops_per_cpu_s"] / peak["gflops_per_cpu_s"], 1)
        if case.peak_target:
            row["passed_peak"] = row["percent_of_peak_per_cpu_s"] >= case.peak_target
            row["conv_ceiling"] = conv_ceiling(zoo_model, case.batch_size, 3 * flops, peak["gflops_per_cpu_s"])
    with tempfile.TemporaryDirectory(prefix="zoo-train-profile-") as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            timed_fit(zoo_model, ds, profile_steps, 1)
        finally:
            tf.profiler.experimental.stop()
        row["top_ops"] = compiled_op_summary(logdir, steps=profile_steps + 1)
    return row


def measure_in_fresh_process(name: str, settings, peak: dict | None, seed: int, profile_steps: int,
                             threads: int) -> dict:
    """`measure`'s row from a new Python process whose intra-op pool has `threads` threads."""
    with tempfile.TemporaryDirectory(prefix="zoo-bench-") as folder:
        request, answer = Path(folder) / "request.json", Path(folder) / "row.json"
        request.write_text(json.dumps({"name": name, "settings": dataclasses.asdict(settings), "peak": peak,
                                       "seed": seed, "profile_steps": profile_steps, "threads": threads}))
        subprocess.run([sys.executable, "-m", "benchmarks.model_efficiency", str(request), str(answer)],
                       env=child_env(), check=True)
        return json.loads(answer.read_text())


def _measure_requested(request: str, answer: str) -> None:
    """The fresh process's side of `measure_in_fresh_process`."""
    from zoo.fileio import atomic_write_text
    from zoo.training.thread_pools import set_intra_op_threads

    args = json.loads(Path(request).read_text())
    if not set_intra_op_threads(args["threads"]):
        raise RuntimeError(f"could not set intra_op_threads={args['threads']} in the fresh process")
    row = measure(args["name"], Settings(**args["settings"]), args["peak"], seed=args["seed"],
                  profile_steps=args["profile_steps"])
    atomic_write_text(answer, json.dumps(row, default=float))


def runtime_text(row: dict) -> str:
    """The row's non-default `RECIPE_KNOBS`, in words."""
    parts = [f"{row['intra_op_threads']} intra-op thread(s)" if row.get("intra_op_threads") else "",
             f"{row['steps_per_execution']} steps per call" if row.get("steps_per_execution", 1) > 1 else "",
             ", ".join(f"{k}={v}" for k, v in sorted((row.get("model_overrides") or {}).items()))]
    return ", ".join(p for p in parts if p) or "default"


def top_ops_text(row: dict, top: int = 4) -> str:
    return ", ".join(f"{o['op_type']} {100 * o['share']:.0f}%" for o in (row.get("top_ops") or [])[:top])


def row_text(row: dict) -> str:
    """One line for the console."""
    peak = f", {row['percent_of_peak']:.0f}% of peak" if row.get("percent_of_peak") is not None else ""
    per_cpu = (f" ({row['percent_of_peak_per_cpu_s']:.0f}% per CPU-s)"
               if row.get("percent_of_peak_per_cpu_s") is not None else "")
    return (f"zoo {row['zoo_samples_per_s']:,.0f} samples/s, keras {row['keras_samples_per_s']:,.0f}, "
            f"zoo/keras {row['ratio']:.2f} [{row['ratio_min']:.2f}-{row['ratio_max']:.2f}], per CPU-s "
            f"{row['cpu_ratio']:.2f}; {row['train_gflops']:.0f} GFLOP/s{peak}{per_cpu}; top: {top_ops_text(row)}")


def markdown(rows: list[dict], peak: dict | None) -> str:
    """The per-model table, the targets met, and the top ops."""
    from benchmarks.common import markdown_table

    table = [dict(r, shape="x".join(map(str, r["input_shape"])),
                  range=f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}",
                  cpu=f"{r['cpu_ratio']:.2f} ({r['cpu_ratio_min']:.2f}-{r['cpu_ratio_max']:.2f})",
                  runtime=runtime_text(r), ops=top_ops_text(r),
                  ceiling=(r.get("conv_ceiling") or {}).get("ceiling_percent_of_peak_per_cpu_s", ""))
             for r in rows if "ratio" in r]
    out = [markdown_table(table, [
        ("model", "model"), ("shape", "input"), ("batch_size", "batch"), ("runtime", "recipe settings"),
        ("baseline", "Keras baseline"),
        ("zoo_samples_per_s", "zoo samples/s"), ("keras_samples_per_s", "Keras samples/s"),
        ("ratio", "zoo/Keras"), ("range", "range"), ("cpu", "zoo/Keras per CPU-s"),
        ("ratio_target", "target"), ("train_gflops", "GFLOP/s"), ("percent_of_peak", "% of peak"),
        ("percent_of_peak_per_cpu_s", "% of peak per CPU-s"), ("peak_target", "% target"),
        ("ceiling", "convolutions alone, % per CPU-s"),
        ("ops", "top ops (zoo step)")])]
    if peak and peak.get("gflops"):
        out.append(f"\nPeak: {peak['gflops']:.0f} GFLOP/s by wall time, {peak.get('gflops_per_cpu_s', 0):.0f} "
                   f"GFLOP per CPU-second (float32 matmul, `benchmarks.peak`, same run). Training FLOPs are "
                   f"3x the forward FLOPs (`benchmarks.flops`). Inputs are synthetic, held in memory. "
                   f"\"Convolutions alone\" is the % of peak per CPU-second the step would reach if its Conv2D "
                   f"layers, each timed alone at its shapes (forward, weight and input gradient), were all it "
                   f"ran (`benchmarks.conv_ceiling`): the most that trimming the rest of the step can give.\n")
    return "".join(out)


if __name__ == "__main__":  # measure_in_fresh_process's child
    _measure_requested(*sys.argv[1:3])
