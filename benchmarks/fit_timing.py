"""Timing `fit` fairly on a shared machine: per-step clocks, CPU time, and interleaved (ABBA) rounds.

Two fits compared one after the other drift apart with whatever else runs on
the machine. `interleaved_rates` alternates them, A B B A A B ..., so the
drift cancels in the per-round ratio, and records CPU-seconds of the process
beside wall time: samples per CPU-second measure the step's own cost,
whoever else shares the cores.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time

import keras


@dataclasses.dataclass
class Settings:
    """How long to measure: `rounds` ABBA rounds of fits of `steps` timed steps each, fewer
    where a step is slow (a fit is kept to about `fit_budget_s`, but at least `min_steps`)."""

    steps: int = 200
    warmup_steps: int = 3
    rounds: int = 7
    parity_steps: int = 5
    fit_budget_s: float = 1.5
    min_steps: int = 8


class StepClock(keras.callbacks.Callback):
    """Wall time and the process's CPU time at the end of every training batch."""

    def on_train_begin(self, logs=None):
        self.ends = []
        self.cpu_ends = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())
        self.cpu_ends.append(time.process_time())


def execution_multiple(steps: int, *models) -> int:
    """`steps` rounded up to a multiple of every model's `steps_per_execution`, so that fits of
    each run the same batches."""
    k = math.lcm(*(max(int(getattr(m, "steps_per_execution", 1) or 1), 1) for m in models))
    return k * max(math.ceil(steps / k), 1)


def timed_fit(model, ds, steps: int, warmup_steps: int) -> tuple[float, float, float]:
    """One `fit` of `warmup_steps + steps` steps: (steps/s, steps per CPU-second of this process,
    final loss), both over the steps after the first `warmup_steps`.

    CPU time counts the work, whoever else shares the cores; wall time is what a user waits. Both
    leave out `fit`'s start (building the iterator and callbacks, tracing), a fixed cost per call
    that is not the step's. With `steps_per_execution` k, callbacks see one "step" per k batches,
    so both counts are rounded up to multiples of k (at least k warm-up batches).
    """
    k = max(int(getattr(model, "steps_per_execution", 1) or 1), 1)
    warmup_steps, steps = execution_multiple(warmup_steps, model), execution_multiple(steps, model)
    clock = StepClock()
    history = model.fit(ds, epochs=1, steps_per_epoch=warmup_steps + steps, verbose=0, callbacks=[clock],
                        shuffle=False)
    first = warmup_steps // k - 1  # the end of the last warm-up call
    wall = clock.ends[-1] - clock.ends[first]
    cpu = clock.cpu_ends[-1] - clock.cpu_ends[first]
    return steps / wall, steps / cpu, float(history.history["loss"][-1])


def parity_fits(zoo_model, plain, ds, parity_steps: int) -> tuple[dict, float]:
    """The untimed first fits of both models (tracing), which double as a parity check: the same
    batches from the same start, whatever each one's `steps_per_execution`. Returns the parity
    record (steps, both final losses, their difference) and the plain model's steps/s."""
    steps, warmup = execution_multiple(parity_steps - 1, zoo_model, plain), execution_multiple(1, zoo_model, plain)
    losses, rate = {}, None
    for label, model in (("zoo", zoo_model), ("keras", plain)):
        rate, _, losses[label] = timed_fit(model, ds, steps, warmup)
    return {"steps": steps + warmup, "zoo_loss": losses["zoo"], "keras_loss": losses["keras"],
            "abs_diff": abs(losses["zoo"] - losses["keras"])}, rate


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
    """`rounds` rounds of one timed fit each of `model_a` and `model_b` on `ds`, A first in even rounds.

    Both time the same batches: the counts are rounded up to a multiple of both models'
    `steps_per_execution`."""
    steps, warmup_steps = (execution_multiple(n, model_a, model_b) for n in (steps, warmup_steps))
    rates = {"a": [], "b": []}
    cpu_rates = {"a": [], "b": []}
    for r in range(rounds):
        for name in ("a", "b") if r % 2 == 0 else ("b", "a"):
            steps_per_s, steps_per_cpu_s, _ = timed_fit(model_a if name == "a" else model_b, ds, steps, warmup_steps)
            rates[name].append(steps_per_s * batch_size)
            cpu_rates[name].append(steps_per_cpu_s * batch_size)
    return Interleaved(rates["a"], rates["b"], cpu_rates["a"], cpu_rates["b"])
