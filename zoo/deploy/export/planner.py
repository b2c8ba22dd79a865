"""`plan`: everything an export will do, decided and checked before any work; `zoo.deploy.export.execute` does it.

    plan = zoo.deploy.export.plan(model, "exports/m", ["tflite", "onnx"], precision=("float32", "int8"),
                           data=ExportData.from_dataset("mnist"))
    print(plan.describe())                  # the artifacts it will write, the data of each role, the checks
    report = zoo.deploy.export.execute(plan)       # the same as zoo.deploy.export.export(model, "exports/m", ...)

Everything a caller can get wrong is checked here, in this order: format names (with suggestions),
options a format does not take or values it refuses, the model file (scanned first), the model's
inputs, the class names, the test data's shapes, int8's calibration data, the int8 guards'
validation data, and the output directory. A plan is immutable: its formats, their options, its
targets (one per artifact), the data of each role as arrays by input name, the model's metadata, and
how to verify. `zoo export` builds it from the command line, Python callers from keywords; both then
execute the same plan (`zoo.deploy.export.exporter`).

The format options are not listed here: each format module declares its own (`zoo.deploy.formats`), and
`plan`'s and `export`'s signatures and docstrings are derived from them.

Routes (`zoo.deploy.formats.routes`): each format declares the routes its `convert` takes (`Format.routes`,
e.g. ONNX `("tensorflow", "torch")`, `.pt2` `("torch",)`), and the plan gives each target one
(`Target.route`), after the formats and before anything else:

- `route=None` (the default): each format takes its first route whose package is installed. Where TensorFlow
  is installed that is today's `tensorflow` route (the SavedModel); where it cannot be found, the formats with
  a `torch` route take it, and a format with no installed route is refused up front, naming the way out.
- `route="torch"` (`zoo export --route torch`): every format takes that route; a format without it is refused,
  naming the formats that have it.

A format joins a route by naming it in its `routes` and reading `conversion.target.route` in its `convert`;
the exporter runs each route's targets in a conversion process on that route's Keras backend, and the report
names the route each artifact took.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import tempfile
import textwrap
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from zoo.errors import ZooError
from zoo.deploy.export.data import ExportData
from zoo.fileio import TMP_PREFIX, ensure_dir
from zoo.deploy.formats import DEFAULT_FORMATS, OptionError
from zoo.deploy.formats import inputs as inputs_lib
from zoo.deploy.formats import model_io, option_owners, parse_formats, resolve_options
from zoo.deploy.formats.base import Format
from zoo.deploy.formats.jobs import Target
from zoo.deploy.formats.options import CALIBRATED, GUARDED, INT8_GUARDS
from zoo.deploy.formats.inputs import DataShapeError
from zoo.deploy.formats.metadata import ModelMetadata
from zoo.deploy.formats.trace import Signature
from zoo.deploy.formats.unsafe import Trust
from zoo.run_dir import RunDir

WARMUP_RECORDS = 10  # real test examples written as the SavedModel's TF Serving warmup requests


class OutputDirError(ZooError, OSError):
    """The output directory cannot be created or written."""


@dataclasses.dataclass(frozen=True)
class PlannedData:
    """The data of each role, read and checked: inputs by name (`{input name: array}`), labels where given."""

    test_x: Mapping
    test_y: np.ndarray | None
    description: str
    random: bool = False  # no test data was given: random inputs of the model's shapes
    calibration_x: Mapping | None = None
    validation_x: Mapping | None = None
    validation_y: np.ndarray | None = None
    max_test_samples: int | None = None  # the caller's limit, kept as given (`exporter._scaled_verification`)

    def summary(self) -> dict:
        """What the report says of the data."""
        count = inputs_lib.count
        return {"eval": self.description, "eval_samples": count(self.test_x),
                "calibration": None if self.calibration_x is None else
                f"{count(self.calibration_x)} examples of calibration data",
                "validation": None if self.validation_x is None else
                f"{count(self.validation_x)} examples of validation data (int8 guard)"}


@dataclasses.dataclass(frozen=True)
class ExportPlan:
    """What an export will do (see the module docstring); `zoo.deploy.export.execute(plan)` does it."""

    model: Any  # the keras.Model (loaded from `source` where a path was given)
    source: str | None  # the .keras file it was loaded from
    out_dir: Path
    formats: tuple[Format, ...]
    options: Mapping  # format -> its options, resolved (defaults filled in)
    targets: tuple[Target, ...]  # one per artifact
    signature: Signature
    metadata: ModelMetadata | None
    data: PlannedData
    recurrent: bool = False
    quantization_aware: bool = False
    looped: bool = False  # an unrolled RNN model rebuilt on its loop: `source` is not the model converted
    verify: bool = True
    latency_runs: int = 50
    timeout_s: float = 900
    # a large model's verification uses as many test inputs and latency runs as its checks need
    # (`zoo.deploy.export.verify.sample_budget`), not every one given
    scale_verification: bool = True
    trust: Trust = Trust()
    card: Mapping = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for name in ("options", "card"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def carries_front(self) -> bool:
        """Whether the model has a front-end the formats carry as data (they convert the numeric model after it,
        split from the .keras file: `zoo.deploy.formats.text_front`)."""
        return self.metadata is not None and self.metadata.front_end is not None

    @property
    def needs_keras_file(self) -> bool:
        """Whether a conversion rebuilds the model from a .keras file (RNN routes, the int8 guards, every route
        but the SavedModel's), or the model is on JAX or PyTorch (a TensorFlow-backend child then writes the
        SavedModel from it)."""
        import keras

        return (self.recurrent or keras.backend.backend() != "tensorflow" or self.carries_front
                or any(t.route != "tensorflow" for t in self.targets)
                or any(t.options.get(g) is not None for t in self.targets for g in INT8_GUARDS))

    def describe(self) -> str:
        """The plan in words: the artifacts, the data of each role, the verification."""
        lines = [f"export {self.model.name} to {self.out_dir}:"]
        for t in self.targets:
            lines.append(f"  {t.label:<24} -> {t.path}  (held to {t.precision}; route {t.route})")
        d = self.data.summary()
        lines.append(f"test data: {d['eval']} ({d['eval_samples']} examples)")
        for role in ("calibration", "validation"):
            if d[role]:
                lines.append(f"{role}: {d[role]}")
        lines.append("verification: " + (f"every artifact in its runtime, {self.latency_runs} batch-1 latency runs"
                                         if self.verify else "none (convert only)"))
        lines += [f"memory: {w}" for w in self.memory_warnings()]
        return "\n".join(lines)

    def memory_warnings(self) -> list[str]:
        """The targets whose estimated memory (`zoo.deploy.formats.memory`) the machine's available memory cannot
        fit, said before any conversion starts."""
        from zoo.deploy.formats import memory

        weights, available = memory.weight_bytes(self.model), memory.available_bytes()
        warnings = []
        for t in self.targets:
            needed, external = memory.need(t.format, t.options, weights, available)
            warning = memory.fit_warning(t.label, needed, available)
            if warning:
                warnings.append(f"{warning}: it may be killed for memory. Ways out: "
                                f"{memory.way_out(t.format, external, t.route)}")
        return warnings


def plan(
    model,
    out_dir,
    formats=DEFAULT_FORMATS,
    *,
    data=None,
    input_signature=None,
    class_names=None,
    input_meaning: dict | None = None,
    card: dict | None = None,
    verify: bool = True,
    latency_runs: int = 50,
    timeout_s: float = 900,
    trust=None,
    route: str | None = None,
    **options,
) -> ExportPlan:
    """The plan of exporting `model` to `formats` under `out_dir`, after checking everything (see the module
    docstring). Nothing is written but the (empty) output directory.

    Args:
        model: a `keras.Model`, or a reference to one (`zoo.deploy.artifacts.resolve_model`): a registry name, a
            `.keras` file or a run folder (a file is scanned before it is loaded, and converted from as it is).
        out_dir: where the artifacts, `report.json` and `report.md` go.
        formats: names from `zoo.deploy.formats.MODULES` (or "a,b,c"); see `zoo.deploy.formats.markdown_table()`.
        data: the data of each role, `zoo.deploy.export.ExportData(test=..., calibration=..., validation=...)`;
            or a registered dataset's name, or the path of your own data (`ExportData.of`). Without it, a model
            given by reference uses the data it was trained on where that is recorded (`ExportData.from_run`);
            else artifacts are verified on random inputs of the model's shapes.
        input_signature: what `model(...)` takes, as `tf.TensorSpec`s (one, or a list or dict of them),
            for a subclassed model that was never built; without it such a model is traced from the
            first test batch, else from the shapes it was built with (`zoo.deploy.formats.trace`).
        class_names: a classifier's class names (label i is `class_names[i]`), written into every artifact
            with what its input means (`zoo.deploy.formats.metadata`), for a model not trained by `zoo train`;
            they replace the names a zoo-trained model carries.
        input_meaning: what the input means beyond its shape, for clients: e.g. `{"channel_order": "RGB",
            "scale": "0-255", "mean": [...], "std": [...]}` for preprocessing done outside the model.
        card: extra model-card facts, e.g. `{"recipe": "mnist_fast"}`; `name`, `version`, `author` and `license`
            also go into the artifacts that have a slot for them (the standard TFLite metadata). Where not
            given they are read from the run the model comes from (`model_card`).
        verify: load each artifact in its runtime and check it against Keras (the default).
        latency_runs: batch-1 runs timed per artifact (after 5 warm-up runs); 0 skips latency.
        timeout_s: per artifact.
        trust: what the user accepts of the model file's scan (`zoo.deploy.formats.unsafe.Trust`: the op names they
            reviewed, and Keras's safe_mode off), when `model` is a path.
        route: what every format converts from (`zoo.deploy.formats.routes`: "tensorflow", the SavedModel, or
            "torch", torch.export on Keras's PyTorch backend); None: each format's default, the first of its
            routes that is installed (see the module docstring).

    Format options (declared by the formats; None or absent means the default):
{options}

    Raises:
        OptionError, UnknownNameError, DataShapeError, TraceError, UnsafeArtifactError, ModelFileError,
        OutputDirError: whatever is wrong, named, before any work.
    """
    from zoo.quantization import is_quantized

    fmts = parse_formats(formats)
    chosen_routes = _routes(fmts, route)
    resolved = resolve_options(fmts, options, other_names=OWN_KEYWORDS)
    trust = Trust.of(trust)
    source = run = recorded = None
    if not hasattr(model, "predict"):  # a reference: a registry name, a .keras file, a run folder
        from zoo.deploy.artifacts.reference import resolve_model

        ref = resolve_model(model, trust)
        model, run = ref.model, ref.run
        source = None if ref.path is None else os.path.abspath(ref.path)  # converted from as it is
        if data is None or isinstance(data, ExportData) and data.empty:
            # the data the model was trained on, where its metadata or its run records it
            limit = data.max_test_samples if data is not None else None
            recorded = ExportData.from_run(run, model, max_test_samples=limit)
            data = recorded or data
    looped = model_io.has_unrolled_rnn(model) and model_io.without_config(model) is None
    if looped:  # the same function; every format's RNN route starts from the loop (rebuilt from its config)
        model = model_io.looped_copy(model)
    data = ExportData.of(data, model)
    test = data.role("test")
    signature = _signature(model, input_signature, test)
    from zoo.deploy.formats import metadata as metadata_lib, text_front

    meta = metadata_lib.describe(model, class_names=class_names, input=input_meaning, signature=signature,
                                 output_names=_output_widths(model))  # bad class names: refused before any work
    meta = text_front.declare(model, meta, signature)  # a TextVectorization front: carried as data by the formats
    test_x, test_y = inputs_lib.collect(test, data.max_test_samples, "test data", signature)
    description = data.description or ("test data" if test_y is not None else "given inputs")
    if recorded is not None:
        description += " (recorded with the model: the data it was trained on)"
    random = test_x is None
    if random:
        test_x = inputs_lib.random_inputs(signature, model_io.input_vocabularies(model, signature),
                                          options.get("sequence_length"))
        description = "random inputs (no test data given)"
    recurrent = bool(model_io.recurrent_layers(model))
    quantization_aware = is_quantized(model)  # carries its int8 ranges: no calibration
    calibration_x = _calibration(data, resolved, signature, test_x, recurrent, quantization_aware)
    validation_x, validation_y = _validation(data, resolved, quantization_aware, signature)
    out = _writable_dir(out_dir)
    planned = PlannedData(test_x=MappingProxyType(test_x), test_y=test_y, description=description, random=random,
                          calibration_x=calibration_x, validation_x=validation_x, validation_y=validation_y,
                          max_test_samples=data.max_test_samples)
    return ExportPlan(model=model, source=source, out_dir=out, formats=fmts, options=resolved,
                      targets=_targets(fmts, resolved, out, model.name, quantization_aware, chosen_routes),
                      signature=signature,
                      metadata=meta, data=planned, recurrent=recurrent, quantization_aware=quantization_aware,
                      looped=looped, verify=verify, latency_runs=latency_runs, timeout_s=timeout_s, trust=trust,
                      card=model_card(card, run, meta))


CARD_SLOTS = ("name", "version", "author", "license")  # what the standard TFLite metadata's ModelMetadata holds


def model_card(card: dict | None, run: RunDir | None = None, meta: ModelMetadata | None = None) -> dict:
    """The caller's card, with the version and license of the run the model comes from where not given.

    The run is `run` (the run folder of the model given), else the one the card's `source` (a path) is in. Its
    version is when it started; its license the preset license it was run with (`--preset-license`), else, for a
    model trained on data by zoo, that the weights inherit the data's terms (as `zoo train --save-preset` says).
    """
    out = dict(card or {})
    if run is None and out.get("source"):
        run = RunDir.of(out["source"])
    run = (run.read() if run is not None else {}) or None
    config = (run or {}).get("config") or {}
    if run and run.get("started"):
        out.setdefault("version", f"run started {run['started']}")
    data = (meta.source.get("data") if meta is not None else None) or config.get("data") or config.get("dataset")
    if config.get("preset_license"):
        out.setdefault("license", config["preset_license"])
    elif data and (run or (meta is not None and meta.source.get("data"))):
        out.setdefault("license", f"unspecified: the weights inherit the terms of the training data ({data})")
    return out


def _calibration(data: ExportData, resolved: dict, signature, test_x, recurrent: bool, quantization_aware: bool):
    """int8's calibration inputs by name, or None where no artifact needs them."""
    int8 = [name for name, opts in resolved.items() if set(CALIBRATED) & set(opts.get("precision") or ())]
    if not int8:
        return None
    given = data.role("calibration")
    if given is None:
        if quantization_aware:  # its int8 uses the ranges it learned
            return None
        raise OptionError(f"int8 ({', '.join(int8)}) needs calibration data from the training pipeline: "
                          "data=ExportData(calibration=...), or a dataset or your own data (data='mnist', the CLI's "
                          "--dataset or --data), whose train split it draws.")
    x, _ = inputs_lib.collect(given, max(resolved[n]["calibration_samples"] for n in int8), "calibration data",
                              signature)
    shapes = {k: (v.shape[1:], test_x[k].shape[1:]) for k, v in x.items()}
    if recurrent and any(a != b for a, b in shapes.values()):
        raise DataShapeError(f"calibration data and the test data differ in example shape ({shapes}); the unrolled "
                             "RNN route needs one static shape.")
    return MappingProxyType(x)


def _validation(data: ExportData, resolved: dict, quantization_aware: bool, signature):
    """(inputs, labels) for the int8 guards (`max_accuracy_drop`, `min_agreement`), after checking they apply;
    (None, None) without a guard."""
    guards = {n: [g for g in INT8_GUARDS if o.get(g) is not None] for n, o in resolved.items()}
    guards = {n: g for n, g in guards.items() if g}
    if not guards:
        return None, None
    int8 = [name for name, opts in resolved.items() if set(GUARDED) & set(opts.get("precision") or ())]
    idle = sorted(n for n in guards if n not in int8)
    if idle:
        raise OptionError(f"{guards[idle[0]][0]} guards int8 artifacts, and {', '.join(idle)} is asked for none: "
                          "add int8 to precision (e.g. precision='int8', --precision int8).")
    both = sorted(n for n, g in guards.items() if len(g) > 1)
    if both:
        raise OptionError(f"max_accuracy_drop and min_agreement each choose the layers int8 keeps float; give one of "
                          f"them ({', '.join(both)}).")
    option = next(iter(guards.values()))[0]
    if quantization_aware:
        raise OptionError(f"{option} guards post-training int8; a quantization-aware model's int8 uses its learned "
                          f"ranges. Export it without {option}.")
    if len(signature.inputs) != 1:
        raise OptionError(f"{option} supports single-input models; this one takes {len(signature.inputs)} inputs "
                          f"({signature.describe()}). Export without it.")
    labelled = any("max_accuracy_drop" in g for g in guards.values())
    given = data.role("validation")
    if given is None:
        what = ("labelled validation data to measure each layer's sensitivity on" if labelled else
                "validation data (inputs; labels are not needed) to measure agreement on")
        raise OptionError(f"{option} needs {what}: data=ExportData(validation=...), not the test data, which the "
                          "report quotes, nor the calibration data, whose ranges int8 was fit to (the CLI draws it "
                          "from --dataset's or --data's validation split, --val-split).")
    x, y = inputs_lib.collect(given, None, "validation data", signature)
    if not labelled:
        from zoo.deploy.formats.ptq.budget import Goal, check_inputs

        try:
            check_inputs(Goal.of(resolved[next(iter(guards))]), inputs_lib.count(x))
        except ValueError as e:
            raise OptionError(str(e)) from None
    if labelled and y is None:
        raise DataShapeError("validation data needs labels for max_accuracy_drop: (x, y) arrays or batches of (x, y).")
    return MappingProxyType(x), y


def _signature(model, input_signature, test_data) -> Signature:
    """The model's named inputs; an unbuilt subclassed model is traced from the first test batch."""
    from zoo.deploy.formats import trace

    sample = None
    if input_signature is None and not trace.is_functional(model) and not getattr(model, "_build_shapes_dict", None):
        sample = _first_batch(test_data)
    return trace.signature_of(model, input_signature=input_signature, sample=sample)


def _output_widths(model) -> dict | None:
    """{output name: last-axis size} of a functional model (None for a subclassed one: known after a call)."""
    from zoo.deploy.formats.trace import is_functional, name_outputs

    if not is_functional(model):
        return None
    return {name: int(t.shape[-1]) if len(t.shape) > 1 and t.shape[-1] else 1
            for name, t in name_outputs(model, model.outputs).items()}


def _first_batch(data):
    """The inputs of the first batch of `data` (arrays, (x, y), or batches of them), or None."""
    if data is None:
        return None
    if isinstance(data, (np.ndarray, dict)):
        return data
    if isinstance(data, tuple) and len(data) == 2 and not hasattr(data[0], "__next__"):
        return data[0]
    for batch in data:
        return batch[0] if isinstance(batch, (tuple, list)) and len(batch) in (2, 3) else batch
    return None


def _routes(fmts, asked: str | None) -> dict[str, str]:
    """format -> the route it takes (`zoo.deploy.formats.routes.choose`); a format left with none is refused,
    naming the way out (see the module docstring)."""
    from zoo.deploy.formats import FORMATS, routes

    if asked is not None and not routes.get(asked).installed:
        raise OptionError(f"route {asked!r} needs {routes.get(asked).package}, which is not installed here: "
                          f"pip install {routes.get(asked).package}, or export without route={asked!r}.")
    chosen = {f.name: routes.choose(f.routes, asked) for f in fmts}
    refused = [f.name for f in fmts if chosen[f.name] is None]
    if not refused:
        return chosen
    if asked is not None:
        takers = [name for name, f in FORMATS.items() if asked in f.routes]
        raise OptionError(f"route {asked!r} does not reach {', '.join(refused)} ("
                          + "; ".join(f"{n}: routes {', '.join(FORMATS[n].routes)}" for n in refused)
                          + f"). Formats on the {asked} route: {', '.join(takers)}. Drop {', '.join(refused)}, or "
                          f"export {'them' if len(refused) > 1 else 'it'} without route={asked!r}.")
    packages = sorted({routes.ROUTES[r].package for n in refused for r in FORMATS[n].routes})
    reachable = [n for n, f in FORMATS.items() if not f.missing and routes.choose(f.routes, None)]
    raise OptionError(f"{', '.join(refused)} cannot be exported here: {' or '.join(packages)} cannot be imported "
                      "(" + "; ".join(f"{n} converts only on the route(s) {', '.join(FORMATS[n].routes)}"
                                      for n in refused)
                      + f"). Ways out: pip install {packages[0]}, or export to the formats this machine reaches: "
                      f"{', '.join(reachable) or 'none'}.")


def _targets(fmts, options, out: Path, model_name: str, quantization_aware: bool = False,
             routes: dict | None = None) -> tuple[Target, ...]:
    """One target per format and variant, its options as plain data.

    Every artifact of a quantization-aware model computes int8 arithmetic (emulated or not), so
    it is held to the int8 tolerance.
    """
    targets = []
    for f in fmts:
        opts = {k: (os.fspath(v) if k == "serving_dir" and v is not None else v) for k, v in options[f.name].items()}
        variants = opts[f.variant_option] if f.variant_option else (None,)
        for variant in variants:
            path = out / f.artifact_name(model_name, variant, opts)
            precision = "int8" if quantization_aware else f.precision(variant)
            targets.append(Target(format=f.name, module=f.module, variant=variant, precision=precision,
                                  path=str(path), options=opts, route=(routes or {}).get(f.name, f.routes[0])))
    return tuple(targets)


def _writable_dir(out_dir) -> Path:
    out = Path(out_dir)
    try:
        ensure_dir(out)
        fd, probe = tempfile.mkstemp(prefix=f"{TMP_PREFIX}probe-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except NotADirectoryError:
        raise
    except OSError as e:
        raise OutputDirError(f"Output directory {str(out)!r} is not writable: {e.strerror or e}.") from None
    return out.resolve()  # absolute: a conversion process reused across exports may run in another folder


def derive_signature_and_doc(fn, own) -> None:
    """`fn`'s `**options` replaced by one keyword per declared format option, in its signature (for `help()`,
    IDEs and `inspect`) and its docstring. `own`: the keywords `fn` takes besides them, in order."""
    owners = option_owners()
    clash = sorted(set(owners) & {p.name for p in own})
    if clash:
        raise TypeError(f"Format option(s) {clash} clash with {fn.__name__}()'s own keywords; rename them.")
    keyword = own.index(next(p for p in own if p.kind == inspect.Parameter.KEYWORD_ONLY))
    declared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in owners]
    fn.__signature__ = inspect.signature(fn).replace(parameters=own[:keyword] + declared + own[keyword:])
    lines = []
    for name, (option, takers) in owners.items():
        text = f"{name}: {option.doc()} ({', '.join(takers)})."
        lines.append(textwrap.fill(text, 100, initial_indent=" " * 8, subsequent_indent=" " * 12))
    fn.__doc__ = fn.__doc__.replace("{options}", "\n".join(lines))


def own_parameters(fn) -> list:
    return [p for p in inspect.signature(fn).parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]


PLAN_PARAMETERS = own_parameters(plan)  # before the format options join its signature
OWN_KEYWORDS = tuple(p.name for p in PLAN_PARAMETERS)
derive_signature_and_doc(plan, PLAN_PARAMETERS)
