"""`check`: which formats can run a model, learned in seconds from one trace, before any conversion.

    report = zoo.deploy.export.check(model)                # a keras.Model or a .keras path
    print(report.table())
    report.ok                                       # every format runs it with its own ops
    report.result("tflite").gaps                    # each op, its Keras layers, what would run it

The model is traced once into the export's serving function (`zoo.deploy.formats.saved_model.serving_fn`:
named inputs, a dynamic batch axis, the same layer rewrites) and frozen with control flow v2 kept.
Each format's `unsupported_ops(traced)` (`zoo/deploy/formats/<name>.py`) inspects that graph (how each
knows is its declaration's `check_how`, in the docs table `zoo.deploy.formats.markdown_table()`); the
ops it names are traced back to their Keras layers by `zoo.deploy.formats.diagnose.layer_of`, the mapper
the export's own errors use. Tracing and freezing come first, once; what each step costs per
architecture is measured in `results/deployability/check_vs_export_matrix.md`.

What a check cannot see, the export's verification does: an op a runtime has but fails on at run
time (tfjs's TensorList ops on RNNs returning sequences), a handler that rejects a node's attributes,
numeric differences. Recurrent models are checked as traced, with a dynamic batch, and the ops that
graph would need are named; where the format's export has a route around them (TFLite's batch-1 graph
for RNNs, `route_around` in the format module), that route is converted too, and the format is
`runs via route`, saying so; else the format's `recurrent_route` says what its export does instead.

`zoo export --check MODEL` prints `table()` and exits 0 when every format runs what `zoo export`
would convert (the traced graph, or its route) with its own ops; 1 when some format cannot, needs an
extra runtime such as TFLite's Flex delegate, or could not be checked; 2 on bad input: a CI job fails
before a long conversion would.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from zoo.deploy.formats.diagnose import OpGap, advice, layer_of

RUNS = "runs"
RUNS_VIA_ROUTE = "runs via route"  # the traced graph does not, the graph zoo export converts does (RNNs in TFLite)
NEEDS_RUNTIME = "needs Flex"  # every op it lacks runs through an extra runtime (TFLite's Flex delegate)
CANNOT_RUN = "cannot run"
NOT_CHECKED = "not checked"
STATUSES = (RUNS, RUNS_VIA_ROUTE, NEEDS_RUNTIME, CANNOT_RUN, NOT_CHECKED)

@dataclasses.dataclass(frozen=True)
class Gap:
    """One op type a format cannot run: how many nodes, the Keras layers holding them, what would run it."""

    op: str
    count: int
    layers: tuple[tuple[str, str], ...]  # (layer name, class name)
    needs: str | None = None  # an extra runtime that runs it (TFLite's Flex delegate), or None: nothing

    def describe(self) -> str:
        where = ", ".join(f"'{name}' ({cls})" for name, cls in self.layers[:4])
        if len(self.layers) > 4:
            where += f" and {len(self.layers) - 4} more"
        return f"{self.op} x{self.count} in {where or 'no Keras layer scope (a model-level op)'}"


@dataclasses.dataclass
class FormatCheck:
    """What one format can do with the model."""

    format: str
    gaps: list[Gap] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    advice: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None  # the check itself failed (a converter crash): the format's status is unknown
    route: str | None = None  # the export's route that avoids the gaps (checked), e.g. TFLite's batch-1 graph

    @property
    def status(self) -> str:
        if self.error:
            return NOT_CHECKED
        if not self.gaps:
            return RUNS
        if self.route:
            return RUNS_VIA_ROUTE
        return NEEDS_RUNTIME if all(g.needs for g in self.gaps) else CANNOT_RUN

    @property
    def ok(self) -> bool:
        """The format runs what `zoo export` would convert, with its own ops."""
        return self.status in (RUNS, RUNS_VIA_ROUTE)

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "status": self.status, "ok": self.ok}


@dataclasses.dataclass
class CheckReport:
    """`check`'s answer: one `FormatCheck` per format, in the order checked."""

    model: dict  # name, class, inputs, traced_from
    results: list[FormatCheck]
    trace_s: float
    wall_s: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def exit_code(self) -> int:
        """`zoo export --check`'s: 0 when every format runs what `zoo export` converts with its own ops, else 1."""
        return 0 if self.ok else 1

    def result(self, format: str) -> FormatCheck:
        for r in self.results:
            if r.format == format:
                return r
        raise KeyError(f"No check of {format!r} in this report; it has {', '.join(r.format for r in self.results)}.")

    def to_dict(self) -> dict:
        return {"model": self.model, "results": [r.to_dict() for r in self.results], "trace_s": self.trace_s,
                "wall_s": self.wall_s, "ok": self.ok}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def table(self) -> str:
        """The plain-text report `zoo export --check` prints."""
        m = self.model
        header = (f"{m['name']} ({m['class']}): inputs {m['inputs']}; traced from {m['traced_from']} in "
                  f"{self.trace_s:.1f} s")
        lines = [header, ""]
        rows = [("format", "status", "check s", "ops it cannot run as traced (Keras layers)")]
        for r in self.results:
            what = "; ".join(g.describe() for g in r.gaps) if r.gaps else (r.error or "")
            rows.append((r.format, r.status, f"{r.seconds:.2f}", what))
        widths = [max(len(row[c]) for row in rows) for c in range(3)]
        for row in rows:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  " + row[3])
        for r in self.results:
            needs = {}
            for gap in r.gaps:
                if gap.needs:
                    needs.setdefault(gap.needs, []).append(gap.op)
            for what, ops in needs.items():
                lines.append(f"{r.format}: {', '.join(ops)} run{'s' if len(ops) == 1 else ''} only with {what}.")
            if r.route:
                lines.append(f"{r.format}: {r.route}.")
            elif r.advice:
                lines.append(f"{r.format}: {r.advice}")
            for note in r.notes:
                lines.append(f"{r.format}: note: {note}")
        bad = [r.format for r in self.results if not r.ok]
        routed = [r.format for r in self.results if r.status == RUNS_VIA_ROUTE]
        verdict = "every format runs the model" if not bad else f"not runnable as is: {', '.join(bad)}"
        if routed:
            verdict += f" ({', '.join(routed)} through zoo export's route)"
        lines.append(f"checked in {self.wall_s:.1f} s; {verdict}")
        return "\n".join(lines)


def check(model, formats=None, *, input_signature=None, sample=None, opset: int | None = None,
          trust=None) -> CheckReport:
    """Which of `formats` can run `model`, and which ops of which layers stand in the way.

    Args:
        model: a `keras.Model`, or the path of a `.keras` file (scanned first, as `export` does).
        formats: names or "a,b" (default: every format whose runtime is installed, as `export`).
        input_signature, sample: for a subclassed model that was never built (`zoo.deploy.formats.trace`).
        opset: the ONNX opset to check against (default: the onnx format's).
        trust: as for `export` (`zoo.deploy.formats.unsafe.Trust`), when `model` is a path.

    Returns:
        A `CheckReport`; `report.ok` is False when some format cannot run the model as it ships.
        A format whose check itself fails is reported `not checked`, with the error; nothing is raised
        for a format's own failure.
    """
    from zoo.deploy.artifacts import load_model_file
    from zoo.deploy.formats import DEFAULT_FORMATS, model_io, parse_formats, resolve_options
    from zoo.deploy.formats.trace import describe_source, signature_of

    from zoo.deploy.formats import OptionError
    from zoo.deploy.formats.routes import ROUTES

    t_start = time.perf_counter()
    fmts = parse_formats(formats if formats is not None else DEFAULT_FORMATS)
    if not ROUTES["tensorflow"].installed:  # every format's check reads the TensorFlow graph its converter takes
        raise OptionError("zoo export --check traces the model with TensorFlow, which cannot be imported here. "
                          "Export on the torch route instead (zoo export MODEL --formats onnx,openvino,torch): "
                          "each artifact is verified, and a format that cannot convert fails alone, saying why.")
    if opset is not None:  # checked as export checks it: a format list without onnx takes no opset
        resolve_options(fmts, {"opset": opset})
    if not hasattr(model, "predict"):
        model = load_model_file(os.fspath(model), trust=trust)
    signature = signature_of(model, input_signature=input_signature, sample=sample)
    recurrent = bool(model_io.recurrent_layers(model))
    traced = trace_graph(model, signature, {"opset": opset} if opset is not None else {}, recurrent=recurrent)
    trace_s = time.perf_counter() - t_start
    layers = model_io.layer_classes(model)
    numeric, front = _numeric_trace(model, traced, recurrent)
    results = []
    for f in fmts:  # a carried front-end: the formats without string ops convert the numeric model after it
        carried = front is not None and f.name != "saved_model"
        results.append(_check_format(f, numeric if carried else traced, layers, recurrent))
        if carried:
            results[-1].notes.append(f"{front.kind} {front.layer!r} is carried as data (zoo's front-end "
                                     "declaration): the format converts the numeric model after it, and zoo's "
                                     "runners, page and the mobile metadata tokenize raw strings")
    facts = {"name": model.name, "class": type(model).__name__, "inputs": signature.describe(),
             "traced_from": describe_source(signature)}
    return CheckReport(facts, results, trace_s, time.perf_counter() - t_start)


def _numeric_trace(model, traced, recurrent: bool):
    """(the traced numeric model after the model's front-end, the front-end) where it has one zoo carries as
    data (`zoo.deploy.formats.text_front`), else (None, None)."""
    from zoo.deploy.formats import text_front
    from zoo.deploy.formats.trace import signature_of

    try:
        front = text_front.of_model(model)
    except text_front.FrontEndError:  # a front-end zoo cannot carry: the formats' own gaps stand
        return None, None
    if front is None:
        return None, None
    core = text_front.split(model)
    return trace_graph(core, signature_of(core), traced.options, recurrent=recurrent), front


def trace_graph(model, signature, options: dict, batch_size: int | None = None, recurrent: bool = False):
    """The model's serving function, traced once (batch axis dynamic, or `batch_size`), and its frozen graph
    (`formats.jobs.TracedGraph`); `retrace(n)` traces it again with a batch of n (TFLite's RNN route)."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from zoo.deploy.formats.jobs import TracedGraph
    from zoo.deploy.formats.layer_rewrites import portable_layers
    from zoo.deploy.formats.saved_model import serving_fn

    with portable_layers(model):
        function = tf.function(serving_fn(model, signature), input_signature=signature.specs(batch_size))
        concrete = function.get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False, aggressive_inlining=True)
    return TracedGraph(model=model, concrete_function=concrete, graph_def=frozen.graph.as_graph_def(),
                       options=options, recurrent=recurrent,
                       retrace=lambda n: trace_graph(model, signature, options, n, recurrent))


def _check_format(fmt, traced, layers: dict[str, str], recurrent: bool) -> FormatCheck:
    t0 = time.perf_counter()
    result = FormatCheck(fmt.name)
    try:
        gaps: list[OpGap] = fmt.unsupported_ops(traced)
    except Exception as e:  # a converter's own failure: this format is unknown, the others still answer
        result.error = f"{type(e).__name__}: {_first_line(e)}"
        result.seconds = time.perf_counter() - t0
        return result
    result.seconds = time.perf_counter() - t0
    by_op = {}
    for gap in gaps:
        found = sorted({name for name in (layer_of(n, layers) for n in gap.nodes) if name})
        by_op[gap.op] = found
        result.gaps.append(Gap(gap.op, len(gap.nodes), tuple((n, layers[n]) for n in found), gap.needs))
    if result.gaps:
        text = advice(fmt.name, by_op, layers)
        if all(g.needs for g in result.gaps):
            text = (f"Export with allow_flex=True (--allow-flex) and link the Flex delegate into the app; or: "
                    f"{text}")
        result.advice = text
        t1 = time.perf_counter()
        try:
            result.route = fmt.route_around(traced)
        except Exception as e:  # the route's own failure: the gaps stand, and the note says why
            result.notes.append(f"checking zoo export's route failed: {type(e).__name__}: {_first_line(e)}")
        result.seconds += time.perf_counter() - t1
        if recurrent and fmt.recurrent_route and not result.route:
            result.notes.append(fmt.recurrent_route)
    return result


def _first_line(e: Exception) -> str:
    lines = [line for line in str(e).strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
