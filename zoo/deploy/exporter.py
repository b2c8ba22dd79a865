"""`export`: one model to many formats, each verified in its runtime, with a report.

Everything a caller can get wrong is checked before any work: format names
(with suggestions), options a format does not take, the model file, the data
shapes and the output directory. Then each artifact is converted and verified
in a crash-isolated child process, so one format failing never stops or loses another.

The format options are not listed here: each format module declares its own
(`zoo.deploy.formats`), and `export`'s signature and docstring are derived from them.
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

from zoo.deploy import model_io
from zoo.deploy.formats import DEFAULT_FORMATS, OptionError, option_owners, parse_formats, resolve_options
from zoo.deploy.formats.base import Job, Target, median
from zoo.deploy.isolation import ConversionProcess, InProcess
from zoo.deploy.report import ExportReport
from zoo.deploy.results import EXPORT_FAILED, ArtifactResult, KerasReference
from zoo.errors import ZooError
from zoo.fileio import TMP_PREFIX, ensure_dir

RANDOM_EVAL_SAMPLES = 64
RANDOM_SEQUENCE_LENGTH = 16
WARMUP_RECORDS = 10  # real test examples written as the SavedModel's TF Serving warmup requests


class OutputDirError(ZooError, OSError):
    """The output directory cannot be created or written."""


class DataShapeError(ZooError, ValueError):
    """Evaluation or representative data that does not fit the model's input."""


def export(
    model,
    out_dir,
    formats=DEFAULT_FORMATS,
    *,
    test_data=None,
    max_eval_samples=None,
    data_description=None,
    latency_runs: int = 50,
    verify: bool = True,
    isolate: bool = True,
    timeout_s: float = 900,
    card: dict | None = None,
    process: ConversionProcess | None = None,
    **options,
) -> ExportReport:
    """Exports `model` to `formats` under `out_dir`, verifies each artifact and writes a report.

    Args:
        model: a `keras.Model`, or the path of a `.keras` file.
        out_dir: where the artifacts, `report.json` and `report.md` go.
        formats: names from `zoo.deploy.FORMATS` (or "a,b,c"); see `zoo.deploy.formats.markdown_table()`.
        test_data: evaluation data with labels: `(x, y)` arrays or a tf.data of `(x, y)` batches. Parity,
            int8 argmax agreement and accuracy are measured on it; without it, on random inputs.
        max_eval_samples: use at most this many test examples.
        data_description: how the report names the data, e.g. "mnist test split".
        latency_runs: batch-1 runs timed per artifact (after 5 warm-up runs); 0 skips latency.
        verify: load each artifact in its runtime and check it (the default).
        isolate: convert in a child process, so a converter crash fails only its own artifact.
        timeout_s: per artifact.
        card: extra model-card facts, e.g. `{"recipe": "mnist_fast"}`.
        process: a `zoo.deploy.isolation.ConversionProcess` to reuse across exports (saves its start-up);
            not closed here.

    Format options (declared by the formats; None or absent means the default):
{options}

    Returns:
        An `ExportReport`; `report.ok` is False if any artifact failed. Failures are reported, not raised.
    """
    t_start = time.perf_counter()
    fmts = parse_formats(formats)
    resolved = resolve_options(fmts, options, other_names=_OWN_KEYWORDS)
    source = None
    if not hasattr(model, "predict"):
        source = os.fspath(model)
        model = model_io.load_model_file(source)
    input_name, input_shape, input_dtype = model_io.single_input(model)

    eval_x, eval_y = _arrays(test_data, max_eval_samples, "test_data", input_name, input_shape)
    real_x = eval_x is not None  # TF Serving warmup records are built from real examples only
    if eval_x is None:
        eval_x = _random_inputs(input_shape, input_dtype, options.get("sequence_length"))
        data_description = "random inputs (no test data given)"
    eval_x = eval_x.astype(input_dtype, copy=False)
    from zoo.quantization import is_quantized

    quantization_aware = is_quantized(model)  # carries its int8 ranges: no calibration
    int8 = [name for name, opts in resolved.items() if "int8" in (opts.get("precision") or ())]
    rep_x = val_x = val_y = None
    given = next((resolved[n]["representative_data"] for n in int8 if resolved[n].get("representative_data")
                  is not None), None)
    if int8 and (given is not None or not quantization_aware):
        if given is None:
            raise OptionError(f"int8 ({', '.join(int8)}) needs representative_data (from the training pipeline; "
                              "the CLI draws it with --dataset).")
        rep_x, _ = _arrays(given, max(resolved[n]["calibration_samples"] for n in int8), "representative_data",
                           input_name, input_shape)
        if rep_x.shape[1:] != eval_x.shape[1:] and model_io.recurrent_layers(model):
            raise DataShapeError(f"representative_data examples have shape {rep_x.shape[1:]}, the test data "
                                 f"{eval_x.shape[1:]}; the unrolled RNN route needs one static shape.")
    budgeted = [n for n in int8 if resolved[n].get("max_accuracy_drop") is not None]
    if budgeted:
        if quantization_aware:
            raise OptionError("max_accuracy_drop is post-training int8's budget; a quantization-aware model's int8 "
                              "uses its learned ranges. Export it without max_accuracy_drop.")
        given = next((resolved[n]["validation_data"] for n in budgeted if resolved[n].get("validation_data")
                      is not None), None)
        if given is None:
            raise OptionError("max_accuracy_drop needs labelled validation_data to measure each layer's sensitivity "
                              "on (not the test data; the CLI draws it from --dataset's --val-split).")
        val_x, val_y = _arrays(given, None, "validation_data", input_name, input_shape)
        if val_y is None:
            raise DataShapeError("validation_data needs labels: (x, y) arrays or batches of (x, y).")

    out = _writable_dir(out_dir)
    work = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}export-", dir=out))
    runner = process or (ConversionProcess(log_path=work / "conversion.log") if isolate else InProcess())
    try:
        data = _save_data(work, eval_x=eval_x, eval_y=eval_y, rep_x=rep_x, val_x=val_x, val_y=val_y,
                          warmup_x=eval_x[:WARMUP_RECORDS] if real_x else None)
        refs = _keras_outputs(model, eval_x)
        for i, value in enumerate(refs.values()):
            data[f"ref_{i}"] = _save(work, f"ref_{i}", value)
        keras_row = _keras_reference(model, refs, eval_x, eval_y, latency_runs if verify else 0)
        model_path = source or _save_model(model, work)
        results: list[ArtifactResult] = []
        saved_model_dir = None
        for target in _targets(fmts, resolved, out, model.name, quantization_aware):
            job = Job(target=target, model_path=model_path, work_dir=str(work), data=data,
                      output_names=list(refs), saved_model_dir=saved_model_dir, latency_runs=latency_runs,
                      verify=verify)
            result = runner.run(job, timeout_s)
            if target.format == "saved_model" and result.status != EXPORT_FAILED:
                saved_model_dir = result.path
            results.append(result)
    finally:
        if runner is not process:
            runner.close()
        shutil.rmtree(work, ignore_errors=True)

    report = ExportReport(
        model=_model_facts(model, input_name, input_shape, input_dtype, list(refs), source),
        data={"eval": data_description or ("test data" if eval_y is not None else "given inputs"),
              "eval_samples": int(len(eval_x)),
              "calibration": None if rep_x is None else f"{len(rep_x)} examples of representative_data",
              "validation": None if val_x is None else f"{len(val_x)} examples of validation_data (accuracy budget)",
              "quantization_aware": quantization_aware},
        keras=keras_row, results=results, out_dir=str(out), card=dict(card or {}),
        timing={"export_s": sum(r.export_s for r in results), "verify_s": sum(r.verify_s for r in results),
                "wall_s": time.perf_counter() - t_start},
    )
    report.write(out)
    return report


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
    return out


def _arrays(data, limit, what: str, input_name: str, input_shape: tuple):
    """(x, y or None) as numpy from arrays, (x, y) pairs or a tf.data/iterable of batches; shape-checked."""
    if data is None:
        return None, None
    if isinstance(data, np.ndarray):
        xs, ys = [data], None
    elif isinstance(data, (tuple, list)) and len(data) == 2 and all(hasattr(d, "shape") for d in data):
        xs, ys = [np.asarray(data[0])], [np.asarray(data[1])]
    else:
        xs, ys, n = [], [], 0
        for batch in data:
            x, y = (batch[0], batch[1]) if isinstance(batch, (tuple, list)) else (batch, None)
            xs.append(np.asarray(x))
            if y is not None:
                ys.append(np.asarray(y))
            n += len(xs[-1])
            if limit and n >= limit:
                break
        ys = ys or None
        if not xs:
            raise DataShapeError(f"{what} is empty.")
    x = np.concatenate(xs)[:limit]
    y = None if ys is None else np.concatenate(ys)[:limit]
    expected = tuple(input_shape)
    got = tuple(x.shape[1:])
    if len(got) != len(expected) or any(e is not None and e != g for e, g in zip(expected, got)):
        shown = tuple("None" if e is None else e for e in expected)
        raise DataShapeError(
            f"{what} has examples of shape {got}, but the model's input {input_name!r} expects {shown} "
            f"(no batch axis; None is any length)."
        )
    if y is not None and len(y) != len(x):
        raise DataShapeError(f"{what} has {len(x)} inputs but {len(y)} labels.")
    return x, y


def _random_inputs(shape, dtype, sequence_length):
    rng = np.random.default_rng(0)
    shape = tuple(d or sequence_length or RANDOM_SEQUENCE_LENGTH for d in shape)
    if dtype.startswith("int"):
        return rng.integers(0, 2, (RANDOM_EVAL_SAMPLES, *shape)).astype(dtype)
    return rng.random((RANDOM_EVAL_SAMPLES, *shape), dtype=np.float32)


def _save(work: Path, name: str, array) -> str:
    path = work / f"{name}.npy"
    np.save(path, np.asarray(array))
    return str(path)


def _save_data(work: Path, **arrays) -> dict:
    return {name: _save(work, name, a) for name, a in arrays.items() if a is not None}


def _save_model(model, work: Path) -> str:
    path = work / f"{model.name}.keras"
    model.save(path)
    return str(path)


def _keras_outputs(model, x) -> dict:
    import tensorflow as tf

    outputs = model.predict(x, batch_size=1000, verbose=0)
    return {name: np.asarray(v, dtype=np.float32) for name, v in zip(model.output_names, tf.nest.flatten(outputs))}


def _keras_reference(model, refs, x, y, latency_runs) -> KerasReference:
    import tensorflow as tf

    first = next(iter(refs.values()))
    row = KerasReference()
    if y is not None and first.shape[-1] > 1:
        row.accuracy = float(np.mean(np.argmax(first, -1) == y))
    if latency_runs:
        fn = tf.function(lambda t: model(t, training=False))
        x1 = tf.constant(x[:1])
        times = []
        for i in range(5 + latency_runs):
            t0 = time.perf_counter()
            tf.nest.map_structure(lambda t: t.numpy(), fn(x1))
            if i >= 5:
                times.append((time.perf_counter() - t0) * 1e3)
        row.latency_ms = median(times)
    return row


def _model_facts(model, input_name, input_shape, input_dtype, outputs, source) -> dict:
    from zoo.architectures import registry

    facts = {"name": model.name, "params": int(model.count_params()), "source": source,
             "input": {"name": input_name, "shape": ["None" if d is None else d for d in input_shape],
                       "dtype": input_dtype},
             "outputs": outputs, "recurrent_layers": sorted(set(model_io.recurrent_layers(model)))}
    with contextlib.suppress(ZooError):
        spec = registry.get_spec(model.name)
        facts.update(architecture=spec.name, family=spec.family, paper=spec.paper, task=spec.task)
    return facts
