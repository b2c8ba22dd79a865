"""Peak memory of training with and without gradient checkpointing (`tf.recompute_grad`).

    python -m zoo.benchmarks.checkpointing_memory --model resnet56 --batch-size 512

Each mode runs in its own process (peak RSS cannot be reset within one), a
few training steps on random data, and reports the process's peak resident
memory. Activations dominate the difference; the TensorFlow runtime itself
(~0.7 GB) is in both numbers. A benchmark, not a test: the numbers depend on
the machine and allocator.
"""

from __future__ import annotations

import argparse
import json
import os
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
    segments = len(model.train_features[0]._segments) if checkpointing else 1
    return {"model": model_name, "batch_size": batch_size, "checkpointing": checkpointing, "segments": segments,
            "peak_rss_mb": round(peak_mb), "s_per_step": round(seconds, 2)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet56")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--one", choices=("plain", "checkpointed"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(_measure(args.model, args.batch_size, args.steps, args.one == "checkpointed")))
        return 0
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    rows = []
    for mode in ("plain", "checkpointed"):
        out = subprocess.run([sys.executable, "-m", "zoo.benchmarks.checkpointing_memory", "--model", args.model,
                              "--batch-size", str(args.batch_size), "--steps", str(args.steps), "--one", mode],
                             env=env, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    for r in rows:
        print(f"{r['model']:<10} batch {r['batch_size']:<5} checkpointing={str(r['checkpointing']):<6} "
              f"segments={r['segments']:<3} peak RSS {r['peak_rss_mb']:>6} MB  {r['s_per_step']:.2f} s/step")
    saved = rows[0]["peak_rss_mb"] - rows[1]["peak_rss_mb"]
    print(f"checkpointing saves {saved} MB of peak memory ({saved / rows[0]['peak_rss_mb']:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
