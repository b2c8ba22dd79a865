"""The machine's practical fp32 limit: the best square matmul GFLOP/s, measured in this process.

The efficiency numbers of the benchmarks (achieved GFLOP/s as a percentage of peak) are
relative to this, measured in the same run as the models so that a busy or throttled machine
moves both. A large square fp32 matmul is the most efficient thing a CPU does, so it is the
practical roofline for dense layers (the theoretical one, cores x clock x FMA width x 2, is
rarely reached; e.g. 2 cores x ~3 GHz x 2 AVX-512 FMA units x 16 lanes x 2 = ~380 GFLOP/s).
TF's matmul (oneDNN / Eigen, all intra-op threads) is the number used; numpy's BLAS is
recorded beside it as a cross-check.
"""

from __future__ import annotations

import time

import numpy as np

from zoo.benchmarks.common import cpu_count, measure

SIZES = (1024, 2048, 4096)


def _gflops(n: int, timing) -> float:
    # The fastest call: a peak is what the machine can do, not what it did on average.
    return 2.0 * n**3 / (min(timing.times_ms) / 1e3) / 1e9


def tf_matmul_gflops(n: int, budget_s: float = 1.0) -> float:
    """GFLOP/s of `tf.linalg.matmul` on two n x n fp32 matrices (fastest call, all intra-op threads)."""
    import tensorflow as tf

    a = tf.random.uniform((n, n), dtype=tf.float32, seed=0)
    b = tf.random.uniform((n, n), dtype=tf.float32, seed=1)
    matmul = tf.function(tf.linalg.matmul)
    timing = measure(lambda: matmul(a, b).numpy(), warmup=2, min_reps=3, max_reps=50, budget_s=budget_s)
    return _gflops(n, timing)


def numpy_matmul_gflops(n: int, budget_s: float = 1.0) -> float:
    """GFLOP/s of `numpy.matmul` on two n x n fp32 matrices (its BLAS, all threads)."""
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    timing = measure(lambda: a @ b, warmup=1, min_reps=3, max_reps=50, budget_s=budget_s)
    return _gflops(n, timing)


def matmul_peak_gflops(sizes=SIZES, budget_s: float = 1.0) -> dict:
    """The fp32 matmul peak: the best TF matmul over `sizes`, with numpy's beside it.

    Returns `{"gflops": best TF number, "size": n of that, "tf": {n: GFLOP/s}, "numpy": {n: GFLOP/s},
    "method": text, "threads": cpus}`. Takes ~`2 * len(sizes) * budget_s` seconds.
    """
    t0 = time.perf_counter()
    tf_rates = {int(n): round(tf_matmul_gflops(n, budget_s), 1) for n in sizes}
    np_rates = {int(n): round(numpy_matmul_gflops(n, budget_s), 1) for n in sizes}
    best = max(tf_rates, key=tf_rates.get)
    return {
        "gflops": tf_rates[best],
        "size": best,
        "tf": tf_rates,
        "numpy": np_rates,
        "numpy_best": max(np_rates.values()),
        "threads": cpu_count(),
        "method": (f"fastest call of tf.linalg.matmul (tf.function) on square fp32 matrices of sides "
                   f"{', '.join(map(str, sizes))}, {budget_s:g} s each; best size kept"),
        "seconds": round(time.perf_counter() - t0, 1),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(matmul_peak_gflops(), indent=2))
