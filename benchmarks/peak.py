"""The machine's practical fp32 limit: the best square matmul GFLOP/s, measured in this process.

The efficiency numbers of the benchmarks (achieved GFLOP/s as a percentage of peak) are
relative to this, measured in the same run as the models so that a busy or throttled machine
moves both. A large square fp32 matmul is the most efficient thing a CPU does, so it is the
practical roofline for dense layers (the theoretical one, cores x clock x FMA width x 2, is
rarely reached; e.g. 2 cores x ~3 GHz x 2 AVX-512 FMA units x 16 lanes x 2 = ~380 GFLOP/s).
TF's matmul (oneDNN / Eigen, all intra-op threads) is the number used; numpy's BLAS is
recorded beside it as a cross-check.

On a machine shared with other work, the wall-clock peak falls with the load; the peak per
CPU-second of the process (FLOPs over the CPU time the matmul's threads got) does not, and is
the denominator of the per-CPU-second efficiencies that the training benchmark reports beside
the wall-clock ones.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.common import cpu_count, measure

SIZES = (1024, 2048, 4096)


def _gflops(n: int, timing) -> float:
    # The fastest call: a peak is what the machine can do, not what it did on average.
    return 2.0 * n**3 / (min(timing.times_ms) / 1e3) / 1e9


def tf_matmul_gflops(n: int, budget_s: float = 1.0) -> float:
    """GFLOP/s of `tf.linalg.matmul` on two n x n fp32 matrices (fastest call, all intra-op threads)."""
    return tf_matmul_rates(n, budget_s)[0]


def tf_matmul_rates(n: int, budget_s: float = 1.0) -> tuple[float, float]:
    """(GFLOP/s, GFLOP per CPU-second of this process) of `tf.linalg.matmul` on n x n fp32 matrices:
    the fastest call by wall time, and the cheapest by CPU time."""
    import tensorflow as tf

    a = tf.random.uniform((n, n), dtype=tf.float32, seed=0)
    b = tf.random.uniform((n, n), dtype=tf.float32, seed=1)
    matmul = tf.function(tf.linalg.matmul)
    cpu_times = []

    def call():
        start = time.process_time()
        matmul(a, b).numpy()
        cpu_times.append(time.process_time() - start)

    timing = measure(call, warmup=2, min_reps=3, max_reps=50, budget_s=budget_s)
    # process_time ticks coarsely (~1-10 ms): the median call, not the fastest, is the CPU figure.
    cpu_s = sorted(cpu_times[2:])[len(cpu_times[2:]) // 2]
    return _gflops(n, timing), 2.0 * n**3 / max(cpu_s, 1e-9) / 1e9


def numpy_matmul_gflops(n: int, budget_s: float = 1.0) -> float:
    """GFLOP/s of `numpy.matmul` on two n x n fp32 matrices (its BLAS, all threads)."""
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    timing = measure(lambda: a @ b, warmup=1, min_reps=3, max_reps=50, budget_s=budget_s)
    return _gflops(n, timing)


def matmul_peak_gflops(sizes=SIZES, budget_s: float = 1.0) -> dict:
    """The fp32 matmul peak: the best TF matmul over `sizes`, with numpy's beside it.

    Returns `{"gflops": best TF number, "gflops_per_cpu_s": the best per CPU-second, "size": n of
    that, "tf": {n: GFLOP/s}, "numpy": {n: GFLOP/s}, "method": text, "threads": cpus}`. Takes ~`2 * len(sizes) * budget_s` seconds.
    """
    t0 = time.perf_counter()
    both = {int(n): tf_matmul_rates(n, budget_s) for n in sizes}
    tf_rates = {n: round(wall, 1) for n, (wall, _) in both.items()}
    np_rates = {int(n): round(numpy_matmul_gflops(n, budget_s), 1) for n in sizes}
    best = max(tf_rates, key=tf_rates.get)
    return {
        "gflops": tf_rates[best],
        "gflops_per_cpu_s": round(max(cpu for _, cpu in both.values()), 1),
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
