"""Training on TensorFlow, JAX and PyTorch on this machine's CPU, in one run: the same zoo models, data and
settings on each Keras backend.

Per model (convnet_bn on MNIST, resnet20 on MNIST padded to 32x32, lstm_classifier on MNIST's rows) and
backend: training samples per second of wall time and per CPU-second (the work, whatever else shares the
cores), after the compilation, each with its ratio to TensorFlow's. Per backend: the time to 99.0% MNIST
test accuracy of `zoo train`'s default recipe (mnist_fast), compilation included. Each backend runs in a
process of its own (Keras reads its backend once per process), one after another.

    python scripts/benchmark.py backends [--quick] [--backends tensorflow,jax,torch]

Results: benchmarks/results/backends.{json,md}. Uses zoo's public API (zoo.build, zoo.data.load,
zoo.training.load_recipe / train) and Keras.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, child_env

BACKENDS = ("tensorflow", "jax", "torch")
TARGET = 0.99


@dataclasses.dataclass(frozen=True)
class Case:
    """One model trained on one dataset: `steps` timed steps after `warmup` (the compilation)."""

    model: str
    dataset: str
    batch_size: int = 128
    warmup: int = 10
    steps: int = 60


CASES = (Case("convnet_bn", "mnist"), Case("resnet20", "mnist32", steps=30), Case("lstm_classifier", "mnist_sequence"))
QUICK = {"warmup": 2, "steps": 3}


def machine() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"platform": platform.platform(), "processor": _cpu_model() or platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "load_1m": round(load[0], 2) if load else None}


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None


# -- one backend, in its own process -------------------------------------------------------------------


class _Timer:
    """Wall and CPU time of the steps after the warm-up, as a Keras callback (made once Keras is imported)."""

    def __init__(self, warmup: int):
        import keras

        class Callback(keras.callbacks.Callback):
            def on_train_batch_end(cb, batch, logs=None):  # noqa: N805
                if batch + 1 == warmup:
                    self.start, self.cpu = time.perf_counter(), time.process_time()

            def on_train_end(cb, logs=None):  # noqa: N805
                self.wall_s, self.cpu_s = time.perf_counter() - self.start, time.process_time() - self.cpu

        self.callback = Callback()


def throughput(case: Case, quick: bool) -> dict:
    import keras

    import zoo
    import zoo.data
    from zoo.training.builders import resolve_jit_compile

    case = dataclasses.replace(case, **QUICK) if quick else case
    info = zoo.data.dataset_info(case.dataset)
    keras.utils.set_random_seed(0)
    model = zoo.build(case.model, input_shape=info.input_shape, num_classes=info.num_classes)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=resolve_jit_compile("auto"))
    data = zoo.data.load(case.dataset, "train", batch_size=case.batch_size, seed=0, stream_from=0)
    timer = _Timer(case.warmup)
    model.fit(data, steps_per_epoch=case.warmup + case.steps, epochs=1, verbose=0,
              callbacks=[timer.callback])
    samples = case.steps * case.batch_size
    return {"model": case.model, "dataset": case.dataset, "batch_size": case.batch_size, "steps": case.steps,
            "samples_per_s": round(samples / timer.wall_s, 1), "samples_per_cpu_s": round(samples / timer.cpu_s, 1)}


def time_to_accuracy(quick: bool) -> dict:
    from zoo.training import load_recipe, train

    with tempfile.TemporaryDirectory(prefix="zoo-backends-") as out:
        config = load_recipe("mnist_fast", export_dir=None, verbose=0, out=out, backup_every=None)
        if quick:  # proves the path, reaches nothing
            config = config.replace(epochs=1, train_split="train[:512]", val_split="test[:256]",
                                    test_split="test[:256]")
        cpu = time.process_time()
        result = train(config)
        cpu_s = time.process_time() - cpu
    return {"recipe": config.recipe, "test_accuracy": round(result.test_metrics["accuracy"], 4),
            "time_to_target_s": None if result.time_to_target_s is None else round(result.time_to_target_s, 1),
            "train_time_s": round(result.train_time_s, 1), "cpu_s": round(cpu_s, 1), "epochs": config.epochs}


def worker(backend: str, quick: bool, out: str) -> None:
    """Everything measured on `backend`, written to `out` as JSON (run in a fresh process)."""
    os.environ["KERAS_BACKEND"] = backend
    import keras

    assert keras.backend.backend() == backend
    started = time.perf_counter()
    result = {"backend": backend, "keras": keras.__version__, "version": __import__(backend).__version__,
              "models": [throughput(case, quick) for case in CASES], "mnist": time_to_accuracy(quick)}
    result["wall_s"] = round(time.perf_counter() - started, 1)
    Path(out).write_text(json.dumps(result, indent=2))


# -- the run ---------------------------------------------------------------------------------------------


def add_arguments(parser) -> None:
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="a few steps and a tiny MNIST run: proves it works")


def run(args) -> dict:
    """Every backend of `args.backends`, each in a process of its own; "ok" is False if one of them failed."""
    from zoo.errors import UnknownNameError

    chosen = [b.strip() for b in args.backends.split(",") if b.strip()]
    for backend in chosen:
        if backend not in BACKENDS:
            raise UnknownNameError("backend", backend, BACKENDS)
    result = measure(chosen, args.quick)
    result["ok"] = all("error" not in r for r in result["backends"])
    return result


def measure(backends=BACKENDS, quick: bool = False) -> dict:
    rows = []
    for backend in backends:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            env = child_env()
            env.pop("KERAS_BACKEND", None)
            command = [sys.executable, "-m", "benchmarks.backends", "--worker", backend, "--out", out.name]
            print(f"{backend}: {' '.join(command[1:])}", flush=True)
            done = subprocess.run([*command, *(["--quick"] if quick else [])], env=env, cwd=ROOT)
            if done.returncode != 0:
                rows.append({"backend": backend, "error": f"exited with status {done.returncode}"})
                continue
            rows.append(json.loads(Path(out.name).read_text()))
    reference = next((r for r in rows if r["backend"] == "tensorflow" and "models" in r), None)
    for row in rows:
        for m in row.get("models", ()):
            ref = next(x for x in reference["models"] if x["model"] == m["model"]) if reference else None
            m["ratio_to_tensorflow"] = round(m["samples_per_s"] / ref["samples_per_s"], 2) if ref else None
            m["cpu_ratio_to_tensorflow"] = round(m["samples_per_cpu_s"] / ref["samples_per_cpu_s"], 2) if ref else None
    return {"benchmark": "backends", "quick": quick, "target_test_accuracy": TARGET, "machine": machine(),
            "backends": rows}


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        "# Training on each Keras backend (CPU)\n",
        f"`scripts/benchmark.py backends`{' --quick (a tiny run: figures not meaningful)' if result['quick'] else ''}"
        f" on {m['processor']}, {m['cpus']} CPUs (1-minute load average {m['load_1m']} at the start: other work shared the cores when it is above {m['cpus']}). Each backend in its own process; samples/s "
        "after compilation, and per CPU-second (the work, whatever shares the cores); ratios to TensorFlow.\n",
        "| model | backend | samples/s | x TensorFlow | samples/CPU-s | x TensorFlow |",
        "|---|---|---|---|---|---|",
    ]
    for case in CASES:
        for row in result["backends"]:
            m_ = next((x for x in row.get("models", ()) if x["model"] == case.model), None)
            if m_ is None:
                lines.append(f"| {case.model} | {row['backend']} | {row.get('error', '-')} | | | |")
                continue
            lines.append(f"| {case.model} | {row['backend']} {row['version']} | {m_['samples_per_s']:,.0f} | "
                         f"{m_['ratio_to_tensorflow']} | {m_['samples_per_cpu_s']:,.0f} | {m_['cpu_ratio_to_tensorflow']} |")
    lines += ["", f"Time to {result['target_test_accuracy']:.1%} MNIST test accuracy with `zoo train`'s default "
              "recipe (mnist_fast), compilation included:\n",
              "| backend | test accuracy | time to target (s) | training (s) | CPU-s |", "|---|---|---|---|---|"]
    for row in result["backends"]:
        t = row.get("mnist")
        if t:
            reached = t["time_to_target_s"] if t["time_to_target_s"] is not None else "not reached"
            lines.append(f"| {row['backend']} | {t['test_accuracy']:.2%} | {reached} | {t['train_time_s']} | "
                         f"{t['cpu_s']} |")
    return "\n".join(lines) + "\n"


def _worker_main(argv=None) -> int:
    """`python -m benchmarks.backends --worker BACKEND --out FILE [--quick]`: one backend's process."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.backends")
    parser.add_argument("--worker", choices=BACKENDS, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    worker(args.worker, args.quick, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main())
