"""Accuracy-budgeted int8: keep the most quantization-sensitive layers in float until the metric is within budget.

The search is the same for every runtime; a format supplies how to quantize (everything but
some layers, or one layer only) and how to evaluate an artifact:

1. quantize everything; within the budget -> done, nothing stays float;
2. per-layer sensitivity: the metric drop when only that layer is quantized (Krishnamoorthi 2018,
   "Quantizing deep convolutional networks for efficient inference", Section 3.6, and the
   layer-wise analysis of NVIDIA's and Intel's PTQ tools), measured on validation data, never the
   test data the report quotes;
3. keep layers float in order of sensitivity, most sensitive first, re-quantizing and re-measuring
   after each, until the drop is within the budget (or every candidate is float).

Drops are in accuracy points: 0.3 means 0.3 percentage points below the float model.
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

    @property
    def float_layers(self) -> tuple[str, ...]:
        return self.chosen.float_layers

    @property
    def within_budget(self) -> bool:
        return self.chosen.drop <= self.budget + 1e-9

    def summary(self) -> str:
        kept = ", ".join(self.float_layers) or "none"
        verdict = "within" if self.within_budget else "NOT within"
        return (f"full int8 drop {self.full_int8.drop:.2f} points; kept in float: {kept}; final drop "
                f"{self.chosen.drop:.2f} points ({verdict} the {self.budget:g}-point budget)")

    def as_dict(self) -> dict:
        return {
            "budget_points": self.budget, "float_metric": self.float_metric,
            "full_int8_drop": self.full_int8.drop, "final_drop": self.chosen.drop,
            "within_budget": self.within_budget, "float_layers": list(self.float_layers),
            "sensitivity_points": dict(sorted(self.sensitivity.items(), key=lambda kv: -kv[1])),
            "steps": [{"float_layers": list(t.float_layers), "drop": t.drop} for t in self.steps],
            "search_s": round(self.seconds, 1),
        }


def search(
    layers: Sequence[str],
    quantize: Callable[..., str],
    evaluate: Callable[[str], float],
    float_metric: float,
    max_drop: float,
) -> BudgetResult:
    """Runs the search of the module docstring.

    Args:
        layers: the candidate layers, in model order.
        quantize: `quantize(exclude=(...))` -> path of an int8 artifact with those layers float, or
            `quantize(only=layer)` -> one with only that layer quantized.
        evaluate: path -> metric (accuracy in [0, 1]) on the validation data.
        float_metric: the float model's metric on the same data.
        max_drop: the budget, in points (0.3 = 0.3 percentage points).
    """
    if not max_drop >= 0:
        raise ValueError(f"max_drop must be >= 0 (accuracy points). Received: {max_drop!r}")
    if not layers:
        raise ValueError("No quantizable layers to search over.")
    start = time.perf_counter()

    def drop_of(metric):
        return 100.0 * (float_metric - metric)

    def trial(float_layers=(), only=None):
        path = quantize(only=only) if only is not None else quantize(exclude=tuple(float_layers))
        metric = evaluate(path)
        return Trial(tuple(float_layers), (only,) if only is not None else None, metric, drop_of(metric), str(path))

    full = trial()
    steps = [full]
    sensitivity: dict[str, float] = {}
    chosen = full
    if full.drop > max_drop:
        for layer in layers:
            sensitivity[layer] = trial(only=layer).drop
        order = sorted(layers, key=lambda name: (-sensitivity[name], list(layers).index(name)))
        kept: list[str] = []
        for layer in order:
            kept.append(layer)
            chosen = trial(tuple(kept))
            steps.append(chosen)
            if chosen.drop <= max_drop:
                break
    return BudgetResult(budget=float(max_drop), float_metric=float_metric, full_int8=full, sensitivity=sensitivity,
                        chosen=chosen, steps=steps, seconds=time.perf_counter() - start)


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
    of `NO_OWN_ERROR` or a ReLU folded into the op before it."""
    out = []
    for layer in model.layers:
        kind = type(layer).__name__
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


def run(job, layers: Sequence[str], quantize: Callable[..., str], float_path: str, open_runner,
        latency_runs: int = 50) -> BudgetResult:
    """`search` for an export job: validation data, budget and runtime from the job, costs measured.

    `job` is the export's `zoo.deploy.formats.base.Job` (its `val_x`/`val_y` arrays and the target's
    `max_accuracy_drop`); `open_runner(path, example=...)` opens an artifact in the format's runtime.
    The result's `details` carry what the report shows: the float layers, every layer's
    sensitivity and the size and batch-1 latency of the float, full-int8 and chosen artifacts.
    """
    x, y = job.single_input("val_x"), job.array("val_y")
    if x is None or y is None:
        raise ValueError("max_accuracy_drop needs labelled validation_data (the CLI draws it from --val-split).")
    x, y = np.asarray(x), np.asarray(y)

    def evaluate(path):
        return accuracy(open_runner(path, example=x[:1]), x, y)

    result = search(layers, quantize, evaluate, evaluate(float_path), job.target.options["max_accuracy_drop"])
    artifacts = {"float32": float_path, "int8": result.full_int8.path, "chosen": result.chosen.path}
    costs = {"size_bytes": {}, "latency_ms": {}}
    for name, path in artifacts.items():
        costs["size_bytes"][name] = os.path.getsize(path)
        runner = open_runner(path, example=x[:1])
        costs["latency_ms"][name] = statistics.median(runner.latencies_ms(x[:1], latency_runs, 5))
    result.details = {**result.as_dict(), **costs, "summary": result.summary(),
                      "validation_samples": int(len(x))}
    return result
