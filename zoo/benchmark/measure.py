"""`benchmark`: a model in every format and precision, measured on the data it was trained on (see the package).

Which model: a `keras.Model`, or a reference as `zoo.deploy.artifacts.resolve_model` takes it: a `.keras` file, a
run folder (`zoo train`'s) or a registry name (built untrained: size and latency only). Which data, first found:

1. `data`, as `zoo.deploy.export.plan` takes it: `ExportData`, a registered dataset's name or the path of your own data;
2. the data the model was trained on, as its metadata or its run folder records it (`ExportData.from_run`): the
   metric is on the test split training reported on, int8 calibrates on the train split;
3. none: random inputs of the model's shapes (size and latency, no metric, and no full int8, which needs
   calibration data).

An exported artifact, or a folder of them (`zoo export`'s output), is measured as it is, with
`zoo.deploy.artifacts` (`benchmark_artifacts`): no conversion, each artifact opened in its own runtime, its metric by
`zoo.deploy.artifacts.val` on `data` (default: the data its metadata records), its latency on one example. One that
cannot be opened or measured keeps its row, with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from zoo.benchmark.report import METRIC_NAMES, OPEN_FAILED, BenchmarkReport, BenchmarkRow
from zoo.errors import DataError
from zoo.deploy.export.results import FAILED_VERIFICATION, PASSED

FULL_INT8 = "int8"  # the variant that needs calibration data (dynamic int8 does not)
EXPORT_REPORT = "report.json"  # what `zoo export` writes beside the artifacts: each one's format and precision


def benchmark(model, out_dir=None, *, data=None, formats=None, eval_samples: int | None = None,
              latency_runs: int = 50, trust=None, threads: int = 2, **options) -> BenchmarkReport:
    """Exports `model` to every format in `formats` (default: each whose runtime is installed) in every precision
    each offers, verifies each artifact in its runtime on the model's data, and returns (and writes) the table.

    Args:
        model: a `keras.Model`, a `.keras` file, a run folder, a registry name, or an exported artifact or a
            folder of them (measured as they are: `benchmark_artifacts`); see the module docstring.
        out_dir: where the artifacts, the export report and benchmark.json/.md/.csv go (default: the run folder's
            `benchmark/`, else `benchmark-<model name>`).
        data: the data to measure on, as `zoo.deploy.export.plan` takes it; default: the data the model was trained on.
        formats: names or "a,b" (`zoo.deploy.formats.FORMATS`).
        eval_samples: at most this many test examples.
        latency_runs: batch-1 runs timed per artifact, after warm-up.
        threads: runtime threads for existing artifacts (TFLite, ONNX, OpenVINO).
        trust: what the user accepts of the model file's scan (`zoo.deploy.formats.unsafe.Trust`).
        options: format options as `zoo.deploy.export.plan` takes them; a variant option given (`precision`,
            `weight_quantization`) replaces "every precision the format offers".

    Raises:
        UnknownNameError: neither a path nor a registered model (with the close names);
        ArtifactError: a path that does not exist (with the close names beside it) or holds no model or artifact;
        ModelFileError: an empty or corrupt `.keras` file;
        DataError: the recorded data is gone (give `data`); and whatever `zoo.deploy.export.plan` refuses, before any work.
    """
    import zoo.deploy.export
    from zoo.deploy.artifacts.reference import resolve_model
    from zoo.deploy.export import ExportData
    from zoo.deploy.formats import DEFAULT_FORMATS, parse_formats

    artifacts = _artifacts(model)
    if artifacts is not None:
        return benchmark_artifacts(artifacts, out_dir, data=data, formats=formats, latency_runs=latency_runs,
                                   trust=trust, threads=threads, source=model)
    ref = None if hasattr(model, "predict") else resolve_model(model, trust)
    model = model if ref is None else ref.model
    source = None if ref is None else ref.path
    run = None if ref is None else ref.run
    chosen = parse_formats(DEFAULT_FORMATS if formats is None else formats)
    notes = []
    if data is None:
        data = ExportData.from_run(run, model, max_test_samples=eval_samples)
        if data is None:
            notes.append("no data recorded with the model: random inputs, so no metric (give --data PATH_OR_DATASET)")
    else:
        data = ExportData.of(data, model)
        if eval_samples is not None:
            data = dataclasses.replace(data, max_test_samples=eval_samples)
    variants, left_out = every_variant(chosen, options, calibrated=data is not None and data.calibration is not None
                                       or _quantization_aware(model))
    if left_out:
        notes.append(f"{', '.join(left_out)} left out: full int8 calibrates on training data, and there is none")
    if ref is not None and ref.kind == "registry":
        notes.append(f"{model.name} built from the registry, untrained: its outputs (and int8's agreement with them) "
                     "say nothing about a trained model")
    out = Path(out_dir) if out_dir is not None else (run.benchmark if run else Path(f"benchmark-{model.name}"))
    plan = zoo.deploy.export.plan(model if ref is None else ref, out, [f.name for f in chosen], data=data, latency_runs=latency_runs, trust=trust,
                           card={"benchmark": str(source or model.name)}, **{**options, **variants})
    exported = zoo.deploy.export.execute(plan)
    report = BenchmarkReport.from_export(exported, source, keras_runtime=_keras_runtime(), notes=notes)
    report.write()
    return report


def every_variant(formats, options: dict, calibrated: bool) -> tuple[dict, list[str]]:
    """`{variant option: every value the formats taking it offer}` for each variant option not in `options`
    (`precision`: float32, float16, dynamic_int8, int8; TF.js's `weight_quantization`), full int8 only when
    `calibrated`; and the artifacts left out for want of calibration data (`["onnx[int8]", ...]`)."""
    variants, left_out = {}, []
    for f in formats:
        if not f.variant_option or options.get(f.variant_option) is not None:
            continue
        offered = variants.setdefault(f.variant_option, [])
        for value in f.precisions or ():
            if value == FULL_INT8 and f.variant_option == "precision" and not calibrated:
                left_out.append(f"{f.name}[{value}]")
            elif value not in offered:
                offered.append(value)
    return {k: tuple(v) for k, v in variants.items() if v}, left_out


def benchmark_artifacts(paths, out_dir=None, *, data=None, formats=None, latency_runs: int = 50, trust=None,
                        threads: int = 2, source=None) -> BenchmarkReport:
    """Existing artifacts (paths of any kind `zoo.deploy.artifacts.load` opens), each measured as it is: its size, its
    metric on `data` by `zoo.deploy.artifacts.val` (default: the data its metadata records; none: no metric) and its
    median batch-1 latency over `latency_runs` runs after warm-up. One that fails keeps its row, with the reason.
    The table goes to `out_dir` (default: the folder of the artifacts)."""
    from zoo.deploy.artifacts.artifact import load
    from zoo.deploy.artifacts import val
    from zoo.deploy.formats import parse_formats
    from zoo.deploy.formats.ptq.x86_int8 import machine_record

    paths = [Path(p) for p in paths]
    if formats is not None:
        wanted = {f.name for f in parse_formats(formats)}
        paths = [p for p in paths if _kind(p) in wanted]
        if not paths:
            raise DataError(f"none of the artifacts is in the formats asked for ({', '.join(sorted(wanted))}).")
    variants = _recorded_variants(paths[0].parent if paths else Path("."))
    start = time.perf_counter()
    rows, notes, described, examples, metric = [], [], "", 0, None
    for path in paths:
        kind = _kind(path) or "?"
        precision = variants.get(path.resolve()) or _variant_from_name(path)
        try:
            art = load(path, threads=threads, trust=trust)
        except Exception as e:  # a damaged or refused artifact: its row says why, the others go on
            rows.append(BenchmarkRow(kind, precision, "", OPEN_FAILED, _size(path), path=str(path),
                                     error=_what(e)))
            continue
        value, error = None, None
        source_data = data if data is not None else ((art.metadata.source or {}).get("data") if art.metadata
                                                     else None)
        if source_data is not None:
            try:
                result = val(art, source_data)
                name = next((m for m in METRIC_NAMES if m in result.metrics), None)
                metric, value = metric or name, result.metrics.get(name) if name else None
                described, examples = f"{result.data}, split {result.split}", result.examples
            except Exception as e:
                error = f"metric: {_what(e)}"
        try:
            latency = _latency(art, latency_runs)
        except Exception as e:
            latency, error = None, "; ".join(filter(None, [error, f"latency: {_what(e)}"]))
        rows.append(BenchmarkRow(art.kind, precision, art.runtime, FAILED_VERIFICATION if error else PASSED,
                                 _size(path), value, latency, str(path), error))
    if data is None and not described:
        notes.append("no data recorded in the artifacts' metadata: no metric (give --data)")
    out = Path(out_dir) if out_dir is not None else (paths[0].parent if paths else Path("."))
    name = _model_name(paths, source)
    report = BenchmarkReport(model=name, source=None if source is None else os.fspath(source),
                             data=described or "no data", examples=examples, metric=metric, rows=rows,
                             out_dir=str(out), machine=machine_record(), notes=notes,
                             wall_s=time.perf_counter() - start)
    report.write()
    return report


def _artifacts(ref) -> list[Path] | None:
    """The artifacts to measure as they are when `ref` is an exported artifact or a folder of them; None when it is
    a model to export (a `keras.Model`, a `.keras` file, a run folder, a registry name)."""
    from zoo.deploy.artifacts.artifact import ArtifactError, resolve
    from zoo.run_dir import RunDir

    if hasattr(ref, "predict"):
        return None
    path = Path(os.fspath(ref))
    if not path.exists():
        return None  # `_load` names what is wrong
    if path.is_file():
        return None if path.suffix == ".keras" else [path]
    if RunDir.of(path) is not None:
        return None
    from zoo.benchmark.report import FILES
    from zoo.deploy.formats import FORMATS

    found = []
    for child in sorted(path.iterdir()):
        if child.name in (EXPORT_REPORT, *FILES):  # the reports beside the artifacts, not artifacts
            continue
        try:
            found.append(resolve(child))
        except ArtifactError:
            continue
    if found:  # in the formats' order, then each format's precisions in its order
        order = {name: i for i, name in enumerate(["keras", *FORMATS])}
        return [p for p, _ in sorted(found, key=lambda pk: (order.get(pk[1], len(order)), _precision_rank(pk[0])))]
    try:
        return [resolve(path)[0]]  # a SavedModel base folder, or an artifact that is a folder
    except ArtifactError:
        raise ArtifactError(f"{path} holds no model to benchmark: no run ({' or '.join(RunDir.MODELS)}), no .keras file "
                            "and no exported artifact.") from None


def _kind(path: Path) -> str | None:
    from zoo.deploy.artifacts.artifact import ArtifactError, resolve

    try:
        return resolve(path)[1]
    except ArtifactError:
        return None


def _recorded_variants(folder: Path) -> dict:
    """Artifact path -> its precision, from the export report beside the artifacts (`zoo export`'s report.json)."""
    try:
        report = json.loads((folder / EXPORT_REPORT).read_text())
    except (OSError, ValueError):
        return {}
    return {Path(r["path"]).resolve(): r.get("variant") or "float32" for r in report.get("results") or ()
            if isinstance(r, dict) and r.get("path")}


def _variant_from_name(path: Path) -> str:
    """`convnet_bn_float16.tflite` -> "float16": export names an artifact `<model>_<variant>.<suffix>`."""
    from zoo.deploy.formats import FORMATS

    offered = sorted({str(v) for f in FORMATS.values() for v in (f.precisions or ())}, key=len, reverse=True)
    stem = path.name.split(".")[0]
    return next((v for v in offered if stem.endswith("_" + v)), "float32")


def _precision_rank(path: Path) -> int:
    from zoo.deploy.formats.options import ARTIFACT_PRECISIONS as ORDER

    return ORDER.index(v) if (v := _variant_from_name(path)) in ORDER else len(ORDER)


def _latency(art, runs: int) -> float | None:
    """Median ms of `runs` batch-1 predictions on zeros of the artifact's input spec, after 5 warm-up runs."""
    import numpy as np

    if not runs:
        return None
    specs = art.runner.inputs
    x = {s.name: np.zeros((1, *(d or 1 for d in s.shape)), s.dtype) for s in specs}
    x = next(iter(x.values())) if len(x) == 1 else x
    for _ in range(5):
        art.runner.predict(x)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        art.runner.predict(x)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def _size(path: Path) -> int | None:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return None


def _model_name(paths, source) -> str:
    if source is not None and Path(os.fspath(source)).is_dir():
        return Path(os.fspath(source)).resolve().name
    return paths[0].name.split(".")[0] if paths else "artifacts"


def _what(e: Exception) -> str:
    return str(e) or type(e).__name__


def _quantization_aware(model) -> bool:
    from zoo.quantization import is_quantized

    return is_quantized(model)


def _keras_runtime() -> str:
    import keras

    return f"Keras {keras.__version__} ({keras.backend.backend()})"
