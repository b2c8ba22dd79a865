"""`export`: one model to many formats, each verified in its runtime, with a report.

Everything a caller can get wrong is checked before any work: format names
(with suggestions), options a format does not take, the model file, the data
shapes and the output directory. Then each artifact is converted and verified
in a crash-isolated child process, so one format failing never stops or loses another.

The format options are not listed here: each format module declares its own
(`zoo.formats`), and `export`'s signature and docstring are derived from them.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from zoo.formats import inputs, metadata, model_io
from zoo.formats.inputs import DataShapeError
from zoo.formats import DEFAULT_FORMATS, OptionError, option_owners, parse_formats, resolve_options
from zoo.formats.base import INT8_GUARDS, Job, Target, median
from zoo.export.isolation import ConversionProcess, InProcess
from zoo.export.report import ExportReport
from zoo.export.results import ArtifactResult, KerasReference
from zoo.scan import parse_allow
from zoo.errors import ZooError
from zoo.fileio import TMP_PREFIX, ensure_dir

WARMUP_RECORDS = 10  # real test examples written as the SavedModel's TF Serving warmup requests


class OutputDirError(ZooError, OSError):
    """The output directory cannot be created or written."""


def export(
    model,
    out_dir,
    formats=DEFAULT_FORMATS,
    *,
    test_data=None,
    max_eval_samples=None,
    data_description=None,
    input_signature=None,
    latency_runs: int = 50,
    verify: bool = True,
    isolate: bool = True,
    timeout_s: float = 900,
    card: dict | None = None,
    process: ConversionProcess | None = None,
    allow_unsafe_ops=(),
    unsafe_deserialization: bool = False,
    class_names=None,
    input_meaning: dict | None = None,
    **options,
) -> ExportReport:
    """Exports `model` to `formats` under `out_dir`, verifies each artifact and writes a report.

    Args:
        model: a `keras.Model`, or the path of a `.keras` file.
        out_dir: where the artifacts, `report.json` and `report.md` go.
        formats: names from `zoo.formats.MODULES` (or "a,b,c"); see `zoo.formats.markdown_table()`.
        test_data: evaluation data: `x` or `(x, y)`, or a tf.data / iterable of such batches, where `x` is
            what the model takes (an array; a list or dict of arrays for several inputs). Parity (every
            output), int8 argmax agreement and accuracy are measured on it; without it, on random inputs.
        max_eval_samples: use at most this many test examples.
        data_description: how the report names the data, e.g. "mnist test split".
        input_signature: what `model(...)` takes, as `tf.TensorSpec`s (one, or a list or dict of them),
            for a subclassed model that was never built; without it such a model is traced from the
            first `test_data` batch, else from the shapes it was built with (`zoo.formats.trace`).
        latency_runs: batch-1 runs timed per artifact (after 5 warm-up runs); 0 skips latency.
        verify: load each artifact in its runtime and check it (the default).
        isolate: convert in a child process, so a converter crash fails only its own artifact.
        timeout_s: per artifact.
        card: extra model-card facts, e.g. `{"recipe": "mnist_fast"}`.
        process: a `zoo.export.isolation.ConversionProcess` to reuse across exports (saves its start-up);
            not closed here.
        allow_unsafe_ops: op names `zoo.scan` found in the model file that the user reviewed and accepts;
            a model file with any other finding is refused (`UnsafeArtifactError`) before anything runs.
        unsafe_deserialization: load the model file with Keras's safe_mode off (Lambda bytecode runs).
        class_names: a classifier's class names (label i is `class_names[i]`), written into every artifact
            with what its input means (`zoo.formats.metadata`), for a model not trained by `zoo train`;
            they replace the names a zoo-trained model carries.
        input_meaning: what the input means beyond its shape, for clients: e.g. `{"channel_order": "RGB",
            "scale": "0-255", "mean": [...], "std": [...]}` for preprocessing done outside the model.

    Format options (declared by the formats; None or absent means the default):
{options}

    Returns:
        An `ExportReport`; `report.ok` is False if any artifact failed. Failures are reported, not raised.
    """
    t_start = time.perf_counter()
    allow_unsafe_ops = parse_allow(allow_unsafe_ops)
    fmts = parse_formats(formats)
    resolved = resolve_options(fmts, options, other_names=_OWN_KEYWORDS)
    source = None
    if not hasattr(model, "predict"):
        source = os.path.abspath(os.fspath(model))  # for a reused conversion process, as the output folder
        model = model_io.load_model_file(source, allow_unsafe_ops=allow_unsafe_ops,
                                         unsafe_deserialization=unsafe_deserialization)
    looped = model_io.has_unrolled_rnn(model)
    if looped:  # the same function; every format's RNN route starts from the loop (model_io.looped_copy)
        model = model_io.looped_copy(model)
    signature = _signature(model, input_signature, test_data)
    metadata.describe(model, class_names=class_names, input=input_meaning, signature=signature,
                      output_names=_output_widths(model))  # bad class names: refused before any work

    eval_x, eval_y = inputs.collect(test_data, max_eval_samples, "test_data", signature)
    real_x = eval_x is not None  # TF Serving warmup records are built from real examples only
    if eval_x is None:
        eval_x = inputs.random_inputs(signature, model_io.input_vocabularies(model, signature),
                                      options.get("sequence_length"))
        data_description = "random inputs (no test data given)"
    recurrent = bool(model_io.recurrent_layers(model))
    from zoo.quantization import is_quantized

    quantization_aware = is_quantized(model)  # carries its int8 ranges: no calibration
    int8 = [name for name, opts in resolved.items() if "int8" in (opts.get("precision") or ())]
    rep_x = val_x = val_y = None
    given = next((resolved[n]["representative_data"] for n in int8 if resolved[n].get("representative_data")
                  is not None), None)
    if int8 and (given is not None or not quantization_aware):
        if given is None:
            raise OptionError(f"int8 ({', '.join(int8)}) needs representative_data (from the training pipeline; "
                              "the CLI draws it with --dataset or --data).")
        rep_x, _ = inputs.collect(given, max(resolved[n]["calibration_samples"] for n in int8),
                                  "representative_data", signature)
        shapes = {k: (v.shape[1:], eval_x[k].shape[1:]) for k, v in rep_x.items()}
        if recurrent and any(a != b for a, b in shapes.values()):
            raise DataShapeError(f"representative_data and the test data differ in example shape "
                                 f"({shapes}); the unrolled RNN route needs one static shape.")
    guards = {n: [g for g in INT8_GUARDS if o.get(g) is not None] for n, o in resolved.items()}
    guards = {n: g for n, g in guards.items() if g}
    idle = sorted(n for n in guards if n not in int8)
    if idle:
        raise OptionError(f"{guards[idle[0]][0]} guards int8 artifacts, and {', '.join(idle)} is asked for none: "
                          "add int8 to precision (e.g. precision='int8', --precision int8).")
    if guards:
        val_x, val_y = _guard_data(resolved, guards, quantization_aware, signature)
    out = _writable_dir(out_dir)
    work = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}export-", dir=out))
    runner = process or (ConversionProcess(log_path=work / "conversion.log") if isolate else InProcess())
    try:
        data = {name: inputs.save(work / f"{name}.npz", x)
                for name, x in (("eval_x", eval_x), ("rep_x", rep_x), ("val_x", val_x),
                                ("warmup_x", inputs.take(eval_x, 0, WARMUP_RECORDS) if real_x else None))
                if x is not None}
        if eval_y is not None:
            data["eval_y"] = _save(work, "eval_y", eval_y)
        if val_y is not None:
            data["val_y"] = _save(work, "val_y", val_y)
        refs = _keras_outputs(model, signature, eval_x)
        for i, value in enumerate(refs.values()):
            data[f"ref_{i}"] = _save(work, f"ref_{i}", value)
        keras_row = _keras_reference(model, signature, refs, eval_x, eval_y, latency_runs if verify else 0)
        meta = metadata.describe(model, class_names=class_names, input=input_meaning, signature=signature,
                                 output_names={n: int(v.shape[-1]) if v.ndim > 1 else 1 for n, v in refs.items()})
        model_metadata = None if meta is None else meta.to_json()
        saved_model_dir, trace_error = _write_saved_model(model, signature, work, meta)
        model_path, model_path_error = ((source, None) if source and not looped
                                        else _save_model(model, work, recurrent or bool(guards)))
        results: list[ArtifactResult] = []
        layers = model_io.layer_classes(model)
        for target in _targets(fmts, resolved, out, model.name, quantization_aware):
            if trace_error:  # nothing to convert: each artifact says why
                results.append(ArtifactResult(format=target.format, variant=target.variant,
                                              precision=target.precision, options=target.options,
                                              error=trace_error))
                continue
            job = Job(target=target, model_path=model_path, work_dir=str(work), data=data,
                      output_names=list(refs), saved_model_dir=saved_model_dir, latency_runs=latency_runs,
                      verify=verify, signature=signature, layers=layers, recurrent=recurrent,
                      quantization_aware=quantization_aware,
                      model_path_error=model_path_error, model_name=model.name, allow_unsafe_ops=allow_unsafe_ops,
                      unsafe_deserialization=unsafe_deserialization, metadata=model_metadata)
            results.append(runner.run(job, timeout_s))
    finally:
        if runner is not process:
            runner.close()
        shutil.rmtree(work, ignore_errors=True)

    report = ExportReport(
        model=_model_facts(model, signature, list(refs), source, recurrent, meta),
        data={"eval": data_description or ("test data" if eval_y is not None else "given inputs"),
              "eval_samples": inputs.count(eval_x),
              "calibration": None if rep_x is None else f"{inputs.count(rep_x)} examples of representative_data",
              "validation": None if val_x is None else (f"{inputs.count(val_x)} examples of validation_data "
                                                        "(int8 guard)"),
              "quantization_aware": quantization_aware},
        keras=keras_row, results=results, out_dir=str(out), card=dict(card or {}),
        timing={"export_s": sum(r.export_s for r in results), "verify_s": sum(r.verify_s for r in results),
                "wall_s": time.perf_counter() - t_start},
    )
    report.write(out)
    return report


def _guard_data(resolved: dict, guards: dict, quantization_aware: bool, signature):
    """(val_x, val_y) for the int8 guards (`max_accuracy_drop`, `min_agreement`), after checking they apply."""
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
    given = next((resolved[n]["validation_data"] for n in guards if resolved[n].get("validation_data") is not None),
                 None)
    labelled = any("max_accuracy_drop" in g for g in guards.values())
    if given is None:
        what = ("labelled validation_data to measure each layer's sensitivity on" if labelled else
                "validation_data (inputs; labels are not needed) to measure agreement on")
        raise OptionError(f"{option} needs {what}: not the test data, which the report quotes, nor the calibration "
                          "data, whose ranges int8 was fit to (the CLI draws it from --dataset's or --data's "
                          "validation split, --val-split).")
    val_x, val_y = inputs.collect(given, None, "validation_data", signature)
    if not labelled:
        from zoo.formats.ptq.budget import Goal, check_inputs

        try:
            check_inputs(Goal.of(resolved[next(iter(guards))]), inputs.count(val_x))
        except ValueError as e:
            raise OptionError(str(e)) from None
    if labelled and val_y is None:
        raise DataShapeError("validation_data needs labels for max_accuracy_drop: (x, y) arrays or batches of (x, y).")
    return val_x, val_y


def _signature(model, input_signature, test_data):
    """The model's named inputs; an unbuilt subclassed model is traced from the first test batch."""
    from zoo.formats import trace

    sample = None
    if input_signature is None and not trace.is_functional(model) and not getattr(model, "_build_shapes_dict", None):
        sample = _first_batch(test_data)
    return trace.signature_of(model, input_signature=input_signature, sample=sample)


def _output_widths(model) -> dict | None:
    """{output name: last-axis size} of a functional model (None for a subclassed one: known after a call)."""
    from zoo.formats.trace import is_functional, name_outputs

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


def _derive_signature_and_doc(fn) -> None:
    """`fn`'s `**options` replaced by one keyword per declared format option, in its signature (for
    `help()`, IDEs and `inspect`) and its docstring."""
    own = [p for p in inspect.signature(fn).parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
    owners = option_owners()
    clash = sorted(set(owners) & {p.name for p in own})
    if clash:
        raise TypeError(f"Format option(s) {clash} clash with export()'s own keywords; rename them.")
    keyword = own.index(next(p for p in own if p.kind == inspect.Parameter.KEYWORD_ONLY))
    declared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in owners]
    fn.__signature__ = inspect.signature(fn).replace(parameters=own[:keyword] + declared + own[keyword:])
    lines = []
    for name, (option, takers) in owners.items():
        text = f"{name}: {option.doc()} ({', '.join(takers)})."
        lines.append(textwrap.fill(text, 100, initial_indent=" " * 8, subsequent_indent=" " * 12))
    fn.__doc__ = fn.__doc__.replace("{options}", "\n".join(lines))


_OWN_KEYWORDS = tuple(p for p in inspect.signature(export).parameters if p != "options")
_derive_signature_and_doc(export)


def _targets(fmts, options, out: Path, model_name: str, quantization_aware: bool = False) -> list[Target]:
    """One target per format and variant; its options as plain data (the arrays travel as files).

    Every artifact of a quantization-aware model computes int8 arithmetic (emulated or not), so
    it is held to the int8 tolerance.
    """
    targets = []
    for f in fmts:
        opts = {k: (os.fspath(v) if k == "serving_dir" and v is not None else v)
                for k, v in options[f.name].items() if k not in ("representative_data", "validation_data")}
        variants = opts[f.variant_option] if f.variant_option else (None,)
        for variant in variants:
            path = out / f.artifact.format(model=model_name, variant=variant)
            precision = "int8" if quantization_aware else f.precision(variant)
            targets.append(Target(format=f.name, module=f.module, variant=variant, precision=precision,
                                  path=str(path), options=opts))
    return targets


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


def _save(work: Path, name: str, array) -> str:
    path = work / f"{name}.npy"
    np.save(path, np.asarray(array))
    return str(path)


def _save_model(model, work: Path, needed: bool) -> tuple[str | None, str | None]:
    """(a .keras file of the model, None), or (None, why not). Only the RNN routes rebuild the model from it,
    and the int8 accuracy budget reads its layers."""
    if not needed:
        return None, "not needed: the model has no RNN layers and no accuracy budget"
    path = work / f"{model.name}.keras"
    try:
        model.save(path)
    except Exception as e:  # a subclassed model without get_config, an unserializable custom layer
        return None, f"{type(e).__name__}: {e}"[:500]
    return str(path), None


def _write_saved_model(model, signature, work: Path, meta=None) -> tuple[str | None, str | None]:
    """(the export's SavedModel, None), or (None, why the model could not be traced)."""
    from zoo.formats.signature import export_saved_model

    path = work / "saved_model_default"
    try:
        export_saved_model(model, path, signature=signature, metadata=meta)
    except Exception as e:  # the model's own code fails to trace: every format fails alike, and says why
        return None, (f"tracing the model with inputs {signature.describe()} failed: "
                      f"{type(e).__name__}: {e}")[:2000]
    return str(path), None


def _keras_outputs(model, signature, x: dict) -> dict:
    """Keras's outputs on the named inputs, by output name (`zoo.formats.trace.name_outputs`)."""
    from zoo.formats.trace import name_outputs

    x = inputs.for_keras(x)
    args = signature.pack(x)
    if len(args) == 1:
        outputs = model.predict(args[0], batch_size=256, verbose=0)
    else:  # several positional arguments: model.predict takes one
        parts = [model(*signature.pack(inputs.take(x, i, i + 256)), training=False)
                 for i in range(0, inputs.count(x), 256)]
        import keras

        outputs = keras.tree.map_structure(lambda *p: np.concatenate([np.asarray(v) for v in p]), *parts)
    named = name_outputs(model, outputs)
    return {name: (np.asarray(v, np.float32) if np.asarray(v).dtype.kind in "fiub" else np.asarray(v))
            for name, v in named.items()}


def _keras_reference(model, signature, refs, x, y, latency_runs) -> KerasReference:
    import tensorflow as tf

    first = next(iter(refs.values()))
    row = KerasReference()
    if y is not None and first.ndim > 1 and first.shape[-1] > 1 and np.asarray(y).ndim == 1:
        row.accuracy = float(np.mean(np.argmax(first, -1) == y))
    if latency_runs:
        fn = tf.function(lambda *args: model(*args, training=False))
        args = signature.pack({k: tf.constant(v) for k, v in inputs.for_keras(inputs.take(x, 0, 1)).items()})
        times = []
        for i in range(5 + latency_runs):
            t0 = time.perf_counter()
            tf.nest.map_structure(lambda t: t.numpy(), fn(*args))
            if i >= 5:
                times.append((time.perf_counter() - t0) * 1e3)
        row.latency_ms = median(times)
    return row


def _model_facts(model, signature, outputs, source, recurrent, meta=None) -> dict:
    from zoo.architectures import registry
    from zoo.formats.trace import describe_source

    described = [{"name": t.name, "shape": ["None" if d is None else d for d in t.shape], "dtype": t.dtype}
                 for t in signature.inputs]
    facts = {"name": model.name, "class": type(model).__name__, "params": int(model.count_params()),
             "source": source, "inputs": described, "input": described[0],
             "traced_from": signature.traced_from, "traced_from_text": describe_source(signature),
             "outputs": outputs, "recurrent_layers": sorted(set(model_io.recurrent_layers(model))) if recurrent else []}
    if meta is not None:  # what the artifacts carry (zoo.formats.metadata), for the model card
        facts.update(task=meta.task, class_names=list(meta.class_names) if meta.class_names else None,
                     input_meaning=meta.description, predictions_output=meta.output)
    with contextlib.suppress(ZooError):
        spec = registry.get_spec(model.name)
        facts.update(architecture=spec.name, family=spec.family, paper=spec.paper, task=spec.task)
    return facts
