"""Verification of an artifact in its runtime against the Keras model it came from.

Checks output names and shapes, then the tolerance of its precision class;
measures the task metric (accuracy) on the evaluation set and the batch-1
latency.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from zoo.deploy.formats.base import Job, Runner, median


@dataclasses.dataclass(frozen=True)
class Criterion:
    """What "agrees with Keras" means for one precision class."""

    text: str
    max_abs_diff: float | None = None
    min_argmax_agreement: float | None = None


CRITERIA = {
    "float32": Criterion("max abs diff <= 1e-4", max_abs_diff=1e-4),
    "float16": Criterion("max abs diff <= 1e-2", max_abs_diff=1e-2),
    "int8": Criterion("argmax agreement >= 99%", min_argmax_agreement=0.99),
}
# int8 outputs without a class axis (one unit): argmax is meaningless, so a bound relative to the output range.
INT8_SCALAR_RELATIVE_DIFF = 0.05


def accuracy(outputs: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(outputs, axis=-1) == labels))


def verify(runner: Runner, job: Job) -> dict:
    """Numbers and a verdict for one artifact; `problems` says why it did not pass."""
    x = job.array("eval_x")
    refs = {name: job.array(f"ref_{i}") for i, name in enumerate(job.output_names)}
    outputs = runner.predict(np.asarray(x))
    problems = []
    if sorted(outputs) != sorted(refs):
        problems.append(f"output names {sorted(outputs)} != Keras {sorted(refs)}")
    shapes = {name: list(v.shape) for name, v in outputs.items()}
    for name, ref in refs.items():
        if name in outputs and outputs[name].shape != ref.shape:
            problems.append(f"output {name!r} shape {list(outputs[name].shape)} != Keras {list(ref.shape)}")
    result = {"eval_samples": int(len(x)), "output_shapes": shapes, "runtime": runner.runtime}
    if problems:
        return {**result, "passed": False, "problems": problems}

    first = job.output_names[0]
    diffs = [float(np.max(np.abs(outputs[n].astype(np.float64) - refs[n]))) if refs[n].size else 0.0 for n in refs]
    result["max_abs_diff"] = max(diffs)
    has_classes = refs[first].shape[-1] > 1
    if has_classes:
        result["argmax_agreement"] = float(np.mean(np.argmax(outputs[first], -1) == np.argmax(refs[first], -1)))
    labels = job.array("eval_y")
    if labels is not None and has_classes:
        result["accuracy"] = accuracy(outputs[first], np.asarray(labels))

    criterion = CRITERIA[job.target.precision]
    result["criterion"] = criterion.text
    if not np.isfinite(result["max_abs_diff"]):
        problems.append("outputs are not finite")
    elif criterion.max_abs_diff is not None and result["max_abs_diff"] > criterion.max_abs_diff:
        problems.append(f"max abs diff {result['max_abs_diff']:.3g} > {criterion.max_abs_diff:g}")
    if criterion.min_argmax_agreement is not None:
        if has_classes:
            if result["argmax_agreement"] < criterion.min_argmax_agreement:
                problems.append(
                    f"argmax agreement {result['argmax_agreement']:.2%} < {criterion.min_argmax_agreement:.0%}"
                )
        else:
            span = float(np.ptp(refs[first])) or 1.0
            result["criterion"] = f"max abs diff <= {INT8_SCALAR_RELATIVE_DIFF:.0%} of the output range"
            if result["max_abs_diff"] > INT8_SCALAR_RELATIVE_DIFF * span:
                problems.append(f"max abs diff {result['max_abs_diff']:.3g} > {INT8_SCALAR_RELATIVE_DIFF:.0%} of {span:.3g}")

    if job.latency_runs:
        times = runner.latencies_ms(np.asarray(x[:1]), job.latency_runs, job.warmup_runs)
        result["latency_ms"] = median(times)
        result["latency_runs"] = len(times)
    return {**result, "passed": not problems, "problems": problems}
