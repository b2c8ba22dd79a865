"""The one verification of an artifact against the Keras model it came from.

`compare` checks outputs against Keras's: output names and shapes, then the tolerance of the
artifact's precision class, plus argmax agreement where there is a class axis, and the task metric
where labels were given (`metrics`: accuracy of class scores, else the mean absolute error of values).
`verify` runs an artifact's runner on the evaluation set, compares, and times batch-1 latency.
Export (`zoo.deploy.export.export`, `zoo export`) and the inference benchmark both use them, and both
return typed results.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from zoo.deploy.formats.jobs import TEST
from zoo.deploy.formats.options import GUARDED, INT8_GUARDS
from zoo.deploy.formats.runner import Runner, median


@dataclasses.dataclass(frozen=True)
class Criterion:
    """What "agrees with Keras" means for one precision class."""

    text: str
    max_abs_diff: float | None = None
    min_argmax_agreement: float | None = None


# The float bounds hold for outputs within [-1, 1] (class scores, standardized values) and scale with the largest
# Keras output beyond that: a regressor predicting prices of 2e5 carries float32 rounding of ~0.02 in its units.
CRITERIA = {
    "float32": Criterion("max abs diff <= 1e-4 x max(1, max |Keras output|)", max_abs_diff=1e-4),
    "float16": Criterion("max abs diff <= 1e-2 x max(1, max |Keras output|)", max_abs_diff=1e-2),
    "int8": Criterion("argmax agreement >= 99%", min_argmax_agreement=0.99),
}
FLOAT16_MAX = float(np.finfo(np.float16).max)  # 65504
# How many test inputs a check needs (`sample_budget`): a large model's verification is scaled to a time budget
# per artifact, above a floor that keeps each criterion meaningful. int8's 99% argmax agreement resolves one
# disagreement in 100 only from 100 inputs; a float bound on the largest difference needs fewer.
MIN_SAMPLES = {"float32": 32, "float16": 32, "int8": 100}
VERIFY_BUDGET_S = 20.0  # of Keras time per artifact on the test inputs (other runtimes take about as long)
LATENCY_BUDGET_S = 10.0  # of Keras batch-1 time per artifact on latency runs
MIN_LATENCY_RUNS = 5


@dataclasses.dataclass(frozen=True)
class SampleBudget:
    """How many test inputs and latency runs an export's verification uses, and why (`sample_budget`)."""

    samples: int
    latency_runs: int
    reason: str | None = None  # where fewer than given: the model's per-input cost and the floor


def sample_budget(given: int, latency_runs: int, seconds_per_input: float, precisions) -> SampleBudget:
    """The test inputs and latency runs a model costing `seconds_per_input` (Keras, batch-1) needs: as many as
    `VERIFY_BUDGET_S` and `LATENCY_BUDGET_S` allow, never fewer than the strictest criterion's floor
    (`MIN_SAMPLES`, `MIN_LATENCY_RUNS`), never more than given."""
    floor = max(MIN_SAMPLES.get(p, 32) for p in precisions) if precisions else 32
    affordable = int(VERIFY_BUDGET_S / max(seconds_per_input, 1e-9))
    samples = min(given, max(floor, affordable))
    runs = min(latency_runs, max(MIN_LATENCY_RUNS, int(LATENCY_BUDGET_S / max(seconds_per_input, 1e-9))))
    if samples == given and runs == latency_runs:
        return SampleBudget(samples, runs)
    reason = (f"{samples} of {given} test inputs and {runs} of {latency_runs} latency runs: Keras takes "
              f"{seconds_per_input * 1e3:.0f} ms per input, and each artifact's check is held to about "
              f"{VERIFY_BUDGET_S:g} s (at least {floor} inputs, what its {'int8 agreement' if floor > 32 else 'float bound'}"
              " needs)")
    return SampleBudget(samples, runs, reason)
# int8 outputs without a class axis (one unit): argmax is meaningless, so a bound relative to the output range.
INT8_SCALAR_RELATIVE_DIFF = 0.05


@dataclasses.dataclass
class Comparison:
    """Outputs of an artifact against Keras's; `problems` says why they do not agree (empty: they do)."""

    output_shapes: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    max_abs_diff: float | None = None
    argmax_agreement: float | None = None  # of the first output, where it has a class axis
    accuracy: float | None = None  # of the first output, where labels were given and it has a class axis
    mae: float | None = None  # of the first output, where labels were given and it has none (a regressor's values)
    criterion: str | None = None
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclasses.dataclass
class Verification(Comparison):
    """A `Comparison` run in the artifact's runtime, with the batch-1 latency there."""

    runtime: str = ""
    eval_samples: int = 0
    latency_ms: float | None = None  # median of `latency_runs` batch-1 runs after warm-up
    latency_runs: int | None = None


def accuracy(outputs: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(outputs, axis=-1) == np.asarray(labels)))


def mean_absolute_error(outputs: np.ndarray, targets: np.ndarray) -> float | None:
    """Mean |output - target| over every value, in the targets' units; None where the shapes do not pair up."""
    targets = np.asarray(targets, np.float64)
    outputs = np.asarray(outputs, np.float64)
    if outputs.size != targets.size or not len(targets):
        return None
    return float(np.mean(np.abs(outputs.reshape(targets.shape) - targets)))


def metrics(outputs: np.ndarray, labels: np.ndarray | None) -> dict:
    """The task metric of one output against the labels: `{"accuracy": ...}` for class scores (a class axis and
    one label per example), `{"mae": ...}` for values; empty without labels."""
    if labels is None:
        return {}
    labels = np.asarray(labels)
    if outputs.ndim > 1 and outputs.shape[-1] > 1 and labels.ndim == 1:
        return {"accuracy": accuracy(outputs, labels)}
    mae = mean_absolute_error(outputs, labels)
    return {} if mae is None else {"mae": mae}


def compare(outputs: dict[str, np.ndarray], references: dict[str, np.ndarray], precision: str,
            labels: np.ndarray | None = None, stochastic: tuple[str, ...] = ()) -> Comparison:
    """`outputs` (name -> array) against Keras's `references` under the criterion of `precision`.

    The outputs named in `stochastic` differ between two Keras runs on the same inputs (a layer sampling in
    inference, a counter: keras/src/export/saved_model_test.py's test_model_with_rng_export and
    test_model_with_non_trainable_state_export); they are held to names, shapes, dtypes and summary statistics
    (`compare_statistics`), the others value by value.
    """
    result = Comparison(output_shapes={name: list(np.shape(v)) for name, v in outputs.items()})
    problems = result.problems
    if sorted(outputs) != sorted(references):
        problems.append(f"output names {sorted(outputs)} != Keras {sorted(references)}")
    for name, ref in references.items():
        if name in outputs and np.shape(outputs[name]) != ref.shape:
            problems.append(f"output {name!r} shape {list(np.shape(outputs[name]))} != Keras {list(ref.shape)}")
    if problems:
        return result
    sampled = [n for n in references if n in stochastic]
    for name in sampled:
        problems.extend(compare_statistics(name, np.asarray(outputs[name]), references[name]))
    references = {n: ref for n, ref in references.items() if n not in stochastic}
    criterion = CRITERIA[precision]
    result.criterion = criterion.text
    if sampled:
        result.criterion = (f"{STOCHASTIC_CRITERION} for {', '.join(sampled)}"
                            + (f"; {criterion.text} for the others" if references else ""))
    if not references:
        return result

    first = next(iter(references))
    diffs = [float(np.max(np.abs(np.asarray(outputs[n], np.float64) - ref))) if ref.size else 0.0
             for n, ref in references.items()]
    result.max_abs_diff = max(diffs)
    has_classes = references[first].ndim > 1 and references[first].shape[-1] > 1  # a rank-0 output has no axis
    if has_classes:
        result.argmax_agreement = float(np.mean(np.argmax(outputs[first], -1) == np.argmax(references[first], -1)))
    for name, value in metrics(np.asarray(outputs[first]), labels).items():
        setattr(result, name, value)

    largest = max((float(np.max(np.abs(ref))) for ref in references.values() if ref.size), default=0.0)
    if not np.isfinite(result.max_abs_diff):
        problems.append("outputs are not finite")
    elif criterion.max_abs_diff is not None and result.max_abs_diff > criterion.max_abs_diff * max(1.0, largest):
        why = (f" (Keras's outputs reach {largest:.3g}, beyond float16's largest value, {FLOAT16_MAX:g})"
               if precision == "float16" and largest > FLOAT16_MAX else "")
        problems.append(f"max abs diff {result.max_abs_diff:.3g} > {criterion.max_abs_diff * max(1.0, largest):.3g}{why}")
    if criterion.min_argmax_agreement is not None:
        if has_classes:
            if result.argmax_agreement < criterion.min_argmax_agreement:
                problems.append(f"argmax agreement {result.argmax_agreement:.2%} < "
                                f"{criterion.min_argmax_agreement:.0%}")
        else:
            span = float(np.ptp(references[first])) or 1.0
            result.criterion = (result.criterion or "").replace(
                criterion.text, f"max abs diff <= {INT8_SCALAR_RELATIVE_DIFF:.0%} of the output range")
            if result.max_abs_diff > INT8_SCALAR_RELATIVE_DIFF * span:
                problems.append(f"max abs diff {result.max_abs_diff:.3g} > {INT8_SCALAR_RELATIVE_DIFF:.0%} "
                                f"of {span:.3g}")
    return result


# A stochastic output's mean and standard deviation may move this much (a fraction of Keras's standard deviation)
# from Keras's; below STATISTICS_MIN_VALUES values its statistics say nothing and are not compared.
STATISTICS_TOLERANCE = 0.1
STATISTICS_MIN_VALUES = 30
STOCHASTIC_CRITERION = (f"stochastic (Keras differs from itself on the same inputs): names, shapes, dtypes, and mean "
                        f"and std within {STATISTICS_TOLERANCE:g} x Keras's std (outputs of at least "
                        f"{STATISTICS_MIN_VALUES} values)")


def compare_statistics(name: str, output: np.ndarray, reference: np.ndarray) -> list[str]:
    """Why a stochastic output does not agree with Keras's: its dtype kind, finiteness, mean and std (empty:
    it agrees)."""
    if (output.dtype.kind in "USO") != (reference.dtype.kind in "USO"):
        return [f"output {name!r} is {output.dtype}, Keras's {reference.dtype}"]
    if output.dtype.kind in "USO" or not reference.size:
        return []
    values = np.asarray(output, np.float64)
    if not np.all(np.isfinite(values)):
        return [f"output {name!r} is not finite"]
    if reference.size < STATISTICS_MIN_VALUES:
        return []
    ref = np.asarray(reference, np.float64)
    bound = STATISTICS_TOLERANCE * max(float(np.std(ref)), 1e-6)
    problems = []
    for stat, fn in (("mean", np.mean), ("std", np.std)):
        got, want = float(fn(values)), float(fn(ref))
        if abs(got - want) > bound:
            problems.append(f"stochastic output {name!r}: {stat} {got:.4g} != Keras's {want:.4g} (bound {bound:.3g})")
    return problems


def stochastic_outputs(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> tuple[str, ...]:
    """The outputs that differ between two Keras runs on the same inputs (`second` may cover the first examples
    only): sampling or state in the model, not rounding (a bound of 1e-5 x the output's largest value)."""
    found = []
    for name, a in first.items():
        b = np.asarray(second[name])
        a = np.asarray(a) if a.ndim == 0 or b.ndim == 0 else np.asarray(a)[:len(b)]
        if a.shape != b.shape or a.dtype.kind in "USO":
            if a.shape != b.shape or not np.array_equal(a, b):
                found.append(name)
            continue
        scale = max(1.0, float(np.max(np.abs(a))) if a.size else 1.0)
        if a.size and float(np.max(np.abs(np.asarray(a, np.float64) - b))) > 1e-5 * scale:
            found.append(name)
    return tuple(found)


def verify(runner: Runner, conversion) -> Verification:
    """The artifact's runner on the job's test data (every input, by name) against the Keras outputs (every
    output), and its batch-1 latency (`conversion`: a `zoo.deploy.formats.conversion.Conversion`)."""
    from zoo.deploy.formats.inputs import count, take

    job = conversion.job
    x = conversion.inputs(TEST)
    comparison = compare(runner.predict(x), conversion.references(), job.target.precision, conversion.labels(TEST),
                         stochastic=job.model.stochastic)
    result = Verification(**vars(comparison), runtime=runner.runtime, eval_samples=count(x))
    if comparison.criterion is not None and job.latency_runs:  # names and shapes agree: it runs
        times = runner.latencies_ms(take(x, 0, 1), job.latency_runs, job.warmup_runs)
        result.latency_ms, result.latency_runs = median(times), len(times)
    result.runtime = runner.runtime  # some runners say more once they have run (TF.js: the backend)
    return result


def int8_remedy(verification: Comparison, job) -> str | None:
    """What to do where post-training int8 missed the argmax criterion: the guards (`zoo.deploy.formats.ptq.budget`)
    keep float the layers whose int8 moves the outputs most, and quantization-aware training learns the ranges.
    None where the criterion held, the artifact is not a post-training full int8 of a format that has the guards
    (a TF.js uint8 file's weights alone are quantized), a guard was already asked for, or the ranges were learned."""
    from zoo.deploy.formats.ptq.budget import inputs_needed

    need = CRITERIA["int8"].min_argmax_agreement
    agreement = verification.argmax_agreement
    options = job.target.options  # resolved: every option the format declares
    if (job.target.variant not in GUARDED or not set(INT8_GUARDS) <= set(options) or agreement is None
            or agreement >= need or job.model.quantization_aware
            or any(options.get(g) is not None for g in INT8_GUARDS)):
        return None
    from zoo.deploy.formats import FORMATS

    int16 = "a16w8" in (FORMATS[job.target.format].precisions or {})  # TFLite: LiteRT's quantizer
    keeps = ("gives int16 activations (then float) to" if job.target.variant == "a8w8" else "keeps float")
    return (f"To reach {need:.0%}: min_agreement={100 * need:g} (--min-agreement {100 * need:g}) {keeps} the "
            "layers whose int8 moves the outputs most, measured on the validation data (at least "
            f"{inputs_needed(need)} inputs), at some cost in size and speed; "
            + ("or precision a16w8 (int16 activations, int8 weights, by LiteRT's quantizer; --precision a16w8); "
               if int16 else "")
            + "or fine-tune the model quantization-aware (zoo train --qat-from RUN/last.keras) and export that")
