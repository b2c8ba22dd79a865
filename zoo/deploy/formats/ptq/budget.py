"""Guarded int8: keep the most quantization-sensitive layers in float until a metric is within its bound.

Two guards (`Goal`), one search:

- `max_accuracy_drop` (points): accuracy on labelled validation data within that many points of the
  float model's;
- `min_agreement` (percent): the int8 artifact's top-1 class is the float artifact's on at least
  that share of inputs like the validation ones, at 95% confidence: the lower end of the Wilson
  interval of the agreement measured on the validation inputs reaches the minimum. It needs no
  labels, and it is what a deployment promises: the decisions of the model that was validated
  (zoo's verification holds int8 to 99% agreement with Keras, `zoo.deploy.export.verify.CRITERIA`). The
  bound is on the interval, not the measured share, because a search that stops at the first set of
  float layers whose measured agreement reaches the minimum fits the validation inputs' noise
  (measured on EfficientNetB0: 7 layers float met 99% on 200 validation images and agreed on 98.8%
  of 2000 fresh ones, full int8 on 98.65%; `results/compat/int8_diagnosis.md`). 99% needs at least
  381 validation inputs (`inputs_needed`).

The search is the same for every runtime and guard; a format supplies how to quantize (everything
but some layers, or one layer only) and how to evaluate an artifact:

1. quantize everything; within the budget -> done, nothing stays float;
2. per-layer sensitivity: the metric drop when only that layer is quantized (Krishnamoorthi 2018,
   "Quantizing deep convolutional networks for efficient inference", Section 3.6, and the
   layer-wise analysis of NVIDIA's and Intel's PTQ tools), measured on validation data, never the
   test data the report quotes;
3. keep layers float in order of sensitivity, most sensitive first, re-quantizing and re-measuring
   after each, until the drop is within the budget (or every candidate is float).

Drops are in points of the metric: 0.3 means 0.3 percentage points below the float model (agreement:
the search's metric is the 95% lower bound, the float model, the reference, is at 100%, so a 99%
minimum is a 1-point drop of the lower bound). A single layer
rarely flips a decision among a few hundred examples, so sensitivities tie (mostly at 0); ties are
ordered by how far that layer alone moves the outputs (mean absolute difference to the float
artifact's), so the search still starts where int8 hurts most.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from typing import Callable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Trial:
    """One quantized artifact the search measured."""

    float_layers: tuple[str, ...]  # kept in float ("every layer but" for the sensitivity trials)
    quantized_layers: tuple[str, ...] | None  # for a sensitivity trial: the one layer quantized
    metric: float
    drop: float  # points below the float model
    path: str
    remedied: tuple[tuple[str, str], ...] = ()  # (layer, remedy) for the layers given a remedy other than float


@dataclasses.dataclass(frozen=True)
class Goal:
    """What the search holds int8 to, as a drop in points below the float model's metric."""

    metric: str  # "accuracy" (needs labels) or "agreement" (top-1 agreement with the float artifact)
    max_drop: float  # points

    @classmethod
    def of(cls, options: dict) -> "Goal":
        """The guard a target's options set (`min_agreement` or `max_accuracy_drop`; the export allows one)."""
        if options.get("min_agreement") is not None:
            return cls("agreement", 100.0 - float(options["min_agreement"]))
        if options.get("max_accuracy_drop") is not None:
            return cls("accuracy", float(options["max_accuracy_drop"]))
        raise ValueError("No int8 guard set: give max_accuracy_drop or min_agreement.")

    @property
    def option(self) -> str:
        return "min_agreement" if self.metric == "agreement" else "max_accuracy_drop"

    def describe(self) -> str:
        """e.g. "agreement >= 99%" or "accuracy budget 0.3 points"."""
        if self.metric == "agreement":
            return f"agreement >= {100 - self.max_drop:g}%"
        return f"accuracy budget {self.max_drop:g} points"


@dataclasses.dataclass
class BudgetResult:
    """What the search found: the artifact to keep and why."""

    budget: float
    float_metric: float
    full_int8: Trial
    sensitivity: dict[str, float]  # layer -> drop (points) when only it is quantized
    chosen: Trial
    steps: list[Trial]
    seconds: float
    details: dict = dataclasses.field(default_factory=dict)  # `run`'s report: the search and its costs
    metric: str = "accuracy"  # what `Trial.metric` measures: "accuracy" or "agreement" (`Goal`)

    @property
    def float_layers(self) -> tuple[str, ...]:
        return self.chosen.float_layers

    @property
    def within_budget(self) -> bool:
        return self.chosen.drop <= self.budget + 1e-9

    def summary(self) -> str:
        return summary(self.metric, self.budget, self.float_metric, self.full_int8.metric, self.chosen.metric,
                       self.float_layers, remedied=self.chosen.remedied)

    def as_dict(self) -> dict:
        out = {
            "metric": self.metric, "budget_points": self.budget, "float_metric": self.float_metric,
            "full_int8_drop": self.full_int8.drop, "final_drop": self.chosen.drop,
            "within_budget": self.within_budget, "float_layers": list(self.float_layers),
            **({"remedied_layers": dict(self.chosen.remedied)} if self.chosen.remedied else {}),
            "sensitivity_points": dict(sorted(self.sensitivity.items(), key=lambda kv: -kv[1])),
            "steps": [{"float_layers": list(t.float_layers), "drop": t.drop} for t in self.steps],
            "search_s": round(self.seconds, 1),
        }
        return out


def wilson_interval(share: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% (z = 1.96) Wilson score interval of a share measured on n examples (Wilson 1927; Brown, Cai and
    DasGupta 2001 recommend it for small n and shares near 0 or 1, where the normal approximation fails)."""
    if n <= 0:
        return 0.0, 1.0
    center = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, center - half)), float(min(1.0, center + half))


def inputs_needed(minimum: float, z: float = 1.96) -> int:
    """The fewest inputs on which full agreement's Wilson interval reaches `minimum` (a share): n / (n + z^2)."""
    return int(np.floor(z * z * minimum / (1 - minimum))) + 1 if minimum < 1 else 10**9


def summary(metric: str, max_drop: float, float_metric: float, full_metric: float, chosen_metric: float,
            float_layers, samples: int | None = None, remedied=()) -> str:
    """One line on a guarded int8: where full int8 stood, what stays float, where the result stands.

    For agreement the metrics are measured shares on `samples` inputs; the minimum is met when the lower
    end of the 95% Wilson interval reaches it."""
    kept = ", ".join(float_layers)
    by_remedy: dict[str, list[str]] = {}
    for layer, remedy in remedied:
        by_remedy.setdefault(remedy, []).append(layer)
    given = "".join(f"; given {remedy}: {len(names)} layer(s): {', '.join(names)}" for remedy, names in
                    by_remedy.items())
    if metric == "agreement":
        minimum = (100 - max_drop) / 100
        low, high = wilson_interval(chosen_metric, samples) if samples else (chosen_metric, chosen_metric)
        return (f"full int8 agrees with float on {100 * full_metric:.1f}%; kept in float: {len(float_layers)} "
                f"layer(s){': ' + kept if kept else ''}{given}; "
                f"final agreement {100 * chosen_metric:.1f}% of {samples} "
                f"validation inputs, 95% interval {100 * low:.1f}-{100 * high:.1f}% "
                f"({'meets' if low >= minimum - 1e-9 else 'does NOT meet'} the {100 * minimum:g}% minimum)")
    drop = 100 * (float_metric - chosen_metric)
    within = drop <= max_drop + 1e-9
    return (f"full int8 drop {100 * (float_metric - full_metric):.2f} points; "
            f"kept in float: {kept or 'none'}{given}; "
            f"final drop {drop:.2f} points ({'within' if within else 'NOT within'} the {max_drop:g}-point budget)")


def search(
    layers: Sequence[str],
    quantize: Callable[..., str],
    evaluate: Callable[[str], float],
    float_metric: float,
    max_drop: float,
    tiebreak: Callable[[str], float] | None = None,
    metric: str = "accuracy",
    remedies: Sequence[str] = ("float",),
) -> BudgetResult:
    """Runs the search of the module docstring.

    Args:
        layers: the candidate layers, in model order.
        quantize: `quantize(exclude=(...))` -> path of an int8 artifact with those layers float, or
            `quantize(only=layer)` -> one with only that layer quantized.
        evaluate: path -> metric in [0, 1] (accuracy, or agreement with float) on the validation data.
        float_metric: the float model's metric on the same data (1.0 for agreement).
        max_drop: the budget, in points (0.3 = 0.3 percentage points).
        tiebreak: path -> how far that artifact's outputs are from float's (larger: more sensitive),
            to order layers whose drops tie; None keeps model order among ties.
        metric: what `evaluate` measures, for the summary.
        remedies: what a sensitive layer is given, in order, the last being "float". With more than float
            (LiteRT's quantizer: ("int16", "float")), step 3 gives the layers the first remedy in order of
            sensitivity, and only when all of them have it and the budget is still missed the next one, in the
            same order; `quantize` is then called with `remedied={layer: remedy}` for the layers not float.
    """
    if not max_drop >= 0:
        raise ValueError(f"max_drop must be >= 0 (accuracy points). Received: {max_drop!r}")
    if not layers:
        raise ValueError("No quantizable layers to search over.")
    start = time.perf_counter()

    def drop_of(metric):
        return 100.0 * (float_metric - metric)

    if not remedies or remedies[-1] != "float":
        raise ValueError(f"remedies must end with 'float' (the last resort). Received: remedies={remedies!r}")

    def trial(float_layers=(), only=None, remedied=None):
        if only is not None:
            path = quantize(only=only)
        elif remedied:
            path = quantize(exclude=tuple(float_layers), remedied=dict(remedied))
        else:
            path = quantize(exclude=tuple(float_layers))
        metric = evaluate(path)
        return Trial(tuple(float_layers), (only,) if only is not None else None, metric, drop_of(metric), str(path),
                     tuple((remedied or {}).items()))

    full = trial()
    steps = [full]
    sensitivity: dict[str, float] = {}
    moved: dict[str, float] = {}
    chosen = full
    if full.drop > max_drop:
        for layer in layers:
            single = trial(only=layer)
            sensitivity[layer] = single.drop
            moved[layer] = tiebreak(single.path) if tiebreak is not None else 0.0
        order = sorted(layers, key=lambda name: (-sensitivity[name], -moved[name], list(layers).index(name)))
        given: dict[str, str] = {}  # layer -> its remedy, in the order given
        for remedy in remedies:
            for layer in order:
                given[layer] = remedy
                chosen = trial(tuple(n for n, r in given.items() if r == "float"),
                               remedied={n: r for n, r in given.items() if r != "float"})
                steps.append(chosen)
                if chosen.drop <= max_drop:
                    break
            if chosen.drop <= max_drop:
                break
    return BudgetResult(budget=float(max_drop), float_metric=float_metric, full_int8=full, sensitivity=sensitivity,
                        chosen=chosen, steps=steps, seconds=time.perf_counter() - start, metric=metric)


# Layers whose weights int8 quantizes.
WEIGHTED = ("Conv1D", "Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Conv2DTranspose", "Dense")
# Weightless layers that write a new int8 tensor with its own range: a residual stream's adds, concatenations,
# average pooling. Keeping only weighted layers float leaves these int8, and where activation ranges cost the
# accuracy a budget is then out of reach: a ResNet-20 x0.25 with every conv float still lost 1.7 points in TFLite.
NEW_RANGE = ("Add", "Subtract", "Multiply", "Average", "Concatenate", "GlobalAveragePooling1D",
             "GlobalAveragePooling2D", "AveragePooling1D", "AveragePooling2D")


# Layers that int8 computes with no error of their own: folded into the op before them (BatchNorm, ReLU), only
# moving values (reshapes, max pooling keep the input's scale), or gone in inference (dropout).
NO_OWN_ERROR = ("InputLayer", "BatchNormalization", "ReLU", "Flatten", "Reshape", "Permute", "Dropout",
                "SpatialDropout1D", "SpatialDropout2D", "GaussianDropout", "GaussianNoise", "Identity",
                "MaxPooling1D", "MaxPooling2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "ZeroPadding1D",
                "ZeroPadding2D", "Cropping1D", "Cropping2D")


def quantizable_layers(model) -> list[str]:
    """The units the search keeps float, in model order: the layers with int8-quantizable weights, the
    weightless ones that write a new int8 range (`NEW_RANGE`), a softmax (int8 has a fixed 1/256 output step,
    which ties close classes) and layers of other kinds (a custom layer's ops are int8 too), but not those
    of `NO_OWN_ERROR` or a ReLU folded into the op before it. A nested model (`zoo train --data` wraps the
    architecture behind the input's Rescaling) contributes its own layers: their ops carry their names in
    nested scopes."""
    out = []
    for layer in model.layers:
        kind = type(layer).__name__
        if hasattr(layer, "layers") and layer.layers:  # a nested model: its layers are the units
            out.extend(quantizable_layers(layer))
            continue
        if kind in WEIGHTED + NEW_RANGE:
            out.append(layer.name)
        elif kind == "Activation":
            if getattr(layer.activation, "__name__", "") not in ("relu", "relu6", "linear"):
                out.append(layer.name)
        elif kind not in NO_OWN_ERROR and not layer.weights:
            out.append(layer.name)
    return out


def accuracy(runner, x: np.ndarray, y: np.ndarray) -> float:
    outputs = runner.predict(x)
    first = next(iter(outputs.values()))
    return float(np.mean(np.argmax(first, axis=-1) == y))


def validation(conversion, goal: Goal) -> tuple[np.ndarray, np.ndarray | None]:
    """(inputs, labels) the guard measures on: the export's validation data; labels only for accuracy."""
    x, y = conversion.single_input("validation"), conversion.labels("validation")
    if x is None or (goal.metric == "accuracy" and y is None):
        needed = "labelled validation data" if goal.metric == "accuracy" else "validation data (inputs)"
        raise ValueError(f"{goal.option} needs {needed} (the CLI draws it from --val-split).")
    check_inputs(goal, len(x))
    return np.asarray(x), None if y is None else np.asarray(y)


def check_inputs(goal: Goal, n: int) -> None:
    """Raises if `n` validation inputs cannot show the agreement minimum at 95% confidence."""
    if goal.metric != "agreement":
        return
    minimum = 1 - goal.max_drop / 100
    needed = inputs_needed(minimum)
    if n < needed:
        raise ValueError(f"min_agreement={100 * minimum:g} needs at least {needed} validation inputs: with {n}, even "
                         f"agreement on all of them leaves a 95% interval reaching below {100 * minimum:g}% (its "
                         f"lower end is {100 * n / (n + 1.96 ** 2):.1f}%).")


def run(conversion, layers: Sequence[str], quantize: Callable[..., str], float_path: str, open_runner,
        latency_runs: int = 50, remedies: Sequence[str] = ("float",)) -> BudgetResult:
    """`search` for an export job: guard, validation data and runtime from the job, costs measured.

    `conversion` is the export's `zoo.deploy.formats.conversion.Conversion` (its validation data and the target's
    `max_accuracy_drop` or `min_agreement`); `open_runner(path, example=...)` opens an artifact in the
    format's runtime. Agreement is with the float artifact in the same runtime, and the search holds
    its 95% lower bound to the minimum (the float artifact's is 1: it is the reference). The result's
    `details` carry what the report shows: the float layers, every layer's sensitivity and the size
    and batch-1 latency of the float, full-int8 and chosen artifacts.
    """
    goal = Goal.of(conversion.options)
    x, y = validation(conversion, goal)

    def outputs(path):
        return next(iter(open_runner(path, example=x[:1]).predict(x).values()))

    float_out = outputs(float_path)
    moved: dict[str, float] = {}
    measured: dict[str, float] = {}

    def evaluate(path):
        out = outputs(path)
        moved[str(path)] = float(np.mean(np.abs(np.asarray(out, np.float64) - float_out)))
        reference = float_out.argmax(-1) if goal.metric == "agreement" else y
        measured[str(path)] = share = float(np.mean(out.argmax(-1) == reference))
        return wilson_interval(share, len(x))[0] if goal.metric == "agreement" else share

    float_metric = 1.0 if goal.metric == "agreement" else float(np.mean(float_out.argmax(-1) == y))
    result = search(layers, quantize, evaluate, float_metric, goal.max_drop, tiebreak=moved.get, metric=goal.metric,
                    remedies=remedies)
    artifacts = {"float32": float_path, "int8": result.full_int8.path, "chosen": result.chosen.path}
    costs = {"size_bytes": {}, "latency_ms": {}}
    for name, path in artifacts.items():
        costs["size_bytes"][name] = os.path.getsize(path)
        if latency_runs:
            runner = open_runner(path, example=x[:1])
            costs["latency_ms"][name] = statistics.median(runner.latencies_ms(x[:1], latency_runs, 5))
    result.details = {**result.as_dict(), **costs, "summary": result.summary(), "validation_samples": int(len(x))}
    if goal.metric == "agreement":
        full, chosen = measured[result.full_int8.path], measured[result.chosen.path]
        result.details.update(
            min_agreement=100 - goal.max_drop, full_int8_agreement=full, final_agreement=chosen,
            final_agreement_interval=wilson_interval(chosen, len(x)),
            summary=summary("agreement", goal.max_drop, 1.0, full, chosen, result.float_layers, len(x),
                            result.chosen.remedied))
    return result
