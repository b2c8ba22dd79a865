"""Peak memory of training with and without gradient checkpointing (`tf.recompute_grad`).

    python scripts/benchmark.py checkpointing-memory --model resnet56 --batch-size 512

Each mode runs in its own process (peak RSS cannot be reset within one), a
few training steps on random data, and reports the process's peak resident
memory. Activations dominate the difference; the TensorFlow runtime itself
(~0.7 GB) is in both numbers. A benchmark, not a test: the numbers depend on
the machine and allocator.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _measure(model_name: str, batch_size: int, steps: int, checkpointing: bool) -> dict:
    import keras
    import numpy as np

    import zoo
    from zoo.training import features

    keras.utils.set_random_seed(0)
    model = zoo.build(model_name)
    shape = model.input_shape[1:]
    x = np.random.default_rng(0).random((batch_size, *shape), dtype=np.float32)
    y = np.zeros(batch_size, "int32")
    chosen = [features.GradientCheckpointing()] if checkpointing else []
    model.compile(keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy", jit_compile=False, features=chosen)
    model.train_on_batch(x[:2], y[:2])  # trace on a tiny batch first: the peak is then the big batch's
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(x, y)
    seconds = (time.perf_counter() - start) / steps
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if checkpointing:  # the same split as the feature's (read after the peak: building it costs memory)
        from zoo.training.features.checkpointing import segment_models

        segments = len(segment_models(model))
    else:
        segments = 1
    return {"model": model_name, "batch_size": batch_size, "checkpointing": checkpointing, "segments": segments,
            "peak_rss_mb": round(peak_mb), "s_per_step": round(seconds, 2)}


def add_arguments(parser) -> None:
    parser.add_argument("--model", default="resnet56")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=2)


def run(args) -> dict:
    """Each mode in a fresh process (`python -m benchmarks.checkpointing_memory --one MODE`)."""
    from benchmarks.common import child_env, machine

    rows = []
    for mode in ("plain", "checkpointed"):
        out = subprocess.run([sys.executable, "-m", "benchmarks.checkpointing_memory", "--model", args.model,
                              "--batch-size", str(args.batch_size), "--steps", str(args.steps), "--one", mode],
                             env=child_env(), capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    saved = rows[0]["peak_rss_mb"] - rows[1]["peak_rss_mb"]
    return {"suite": "checkpointing-memory", "machine": machine(), "rows": rows, "saved_mb": saved,
            "saved_fraction": round(saved / rows[0]["peak_rss_mb"], 3)}


def markdown(result: dict) -> str:
    from benchmarks.common import markdown_table

    m = result["machine"]
    return ("# Peak memory with gradient checkpointing\n\n"
            f"On {m['cpu_model']} ({m['cpus']} CPUs); each mode in its own process, peak resident memory of a few "
            "training steps on random data (the TensorFlow runtime, ~0.7 GB, is in both).\n\n"
            + markdown_table(result["rows"], [("model", "model"), ("batch_size", "batch"),
                                              ("checkpointing", "checkpointing"), ("segments", "segments"),
                                              ("peak_rss_mb", "peak RSS MB"), ("s_per_step", "s/step")])
            + f"\nCheckpointing saves {result['saved_mb']} MB of peak memory ({result['saved_fraction']:.0%}).\n")


def _one(argv=None) -> int:
    """`python -m benchmarks.checkpointing_memory --one MODE ...`: one mode's process; prints its row as JSON."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.checkpointing_memory")
    add_arguments(p)
    p.add_argument("--one", choices=("plain", "checkpointed"), required=True)
    args = p.parse_args(argv)
    print(json.dumps(_measure(args.model, args.batch_size, args.steps, args.one == "checkpointed")))
    return 0


if __name__ == "__main__":
    sys.exit(_one())
