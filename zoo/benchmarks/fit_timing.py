"""Timing `fit` fairly on a shared machine: per-step clocks, CPU time, and interleaved (ABBA) rounds.

Two fits compared one after the other drift apart with whatever else runs on
the machine. `interleaved_rates` alternates them, A B B A A B ..., so the
drift cancels in the per-round ratio, and records CPU-seconds of the process
beside wall time: samples per CPU-second measure the step's own cost,
whoever else shares the cores.
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import keras


class StepClock(keras.callbacks.Callback):
    """Wall time at the end of every training batch."""

    def on_train_begin(self, logs=None):
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())


def timed_fit(model, ds, steps: int, warmup_steps: int) -> tuple[float, float, float]:
    """One `fit` of `warmup_steps + steps` steps: (steps/s after the first `warmup_steps`, steps per
    CPU-second of this process over the whole fit, final loss).

    CPU time counts the work, whoever else shares the cores; wall time is what a user waits.
    With `steps_per_execution` k, a "step" seen by callbacks is k batches: pass counts in batches
    that are multiples of k.
    """
    k = max(int(getattr(model, "steps_per_execution", 1) or 1), 1)
    clock = StepClock()
    cpu = time.process_time()
    history = model.fit(ds, epochs=1, steps_per_epoch=warmup_steps + steps, verbose=0, callbacks=[clock],
                        shuffle=False)
    cpu = time.process_time() - cpu
    t = clock.ends
    first = max(warmup_steps // k - 1, 0)
    return steps / (t[-1] - t[first]), (warmup_steps + steps) / cpu, float(history.history["loss"][-1])


@dataclasses.dataclass
class Interleaved:
    """Samples/s of two fits over ABBA rounds: medians, the per-round ratio a/b and its range."""

    a_runs: list
    b_runs: list
    a_cpu_runs: list
    b_cpu_runs: list

    @staticmethod
    def _ratios(a, b):
        return [x / y for x, y in zip(a, b)]

    def summary(self, a: str = "zoo", b: str = "keras") -> dict:
        ratios = self._ratios(self.a_runs, self.b_runs)
        cpu = self._ratios(self.a_cpu_runs, self.b_cpu_runs)
        return {
            f"{a}_samples_per_s": round(statistics.median(self.a_runs), 1),
            f"{b}_samples_per_s": round(statistics.median(self.b_runs), 1),
            f"{a}_runs": [round(v, 1) for v in self.a_runs],
            f"{b}_runs": [round(v, 1) for v in self.b_runs],
            f"{a}_samples_per_cpu_s": round(statistics.median(self.a_cpu_runs), 1),
            "ratio": round(statistics.median(ratios), 3),
            "ratio_min": round(min(ratios), 3),
            "ratio_max": round(max(ratios), 3),
            "cpu_ratio": round(statistics.median(cpu), 3),
            "cpu_ratio_min": round(min(cpu), 3),
            "cpu_ratio_max": round(max(cpu), 3),
        }


def interleaved_rates(model_a, model_b, ds, *, batch_size: int, steps: int, warmup_steps: int,
                      rounds: int) -> Interleaved:
    """`rounds` rounds of one timed fit each of `model_a` and `model_b` on `ds`, A first in even rounds."""
    rates = {"a": [], "b": []}
    cpu_rates = {"a": [], "b": []}
    for r in range(rounds):
        for name in ("a", "b") if r % 2 == 0 else ("b", "a"):
            steps_per_s, steps_per_cpu_s, _ = timed_fit(model_a if name == "a" else model_b, ds, steps, warmup_steps)
            rates[name].append(steps_per_s * batch_size)
            cpu_rates[name].append(steps_per_cpu_s * batch_size)
    return Interleaved(rates["a"], rates["b"], cpu_rates["a"], cpu_rates["b"])
