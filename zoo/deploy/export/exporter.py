"""`export`: one model to many formats, each verified in its runtime, with a report: `plan`, then `execute`.

`zoo.deploy.export.plan` checks everything a caller can get wrong before any work (`zoo.deploy.export.planner`); `execute`
then does the work in four steps:

1. the data of each role to files (`.npz` of named inputs, `.npy` labels), and Keras's own outputs on
   the test inputs, the reference every artifact is compared with (run twice: outputs that differ from
   run to run are stochastic, and verified on their statistics);
2. the model's SavedModel, once, in this process: every format converts from it;
3. one `Job` per target (plain data), each converted and verified in a crash-isolated child process
   (`zoo.deploy.export.isolation`), so one format failing never stops or loses another;
4. the report (`report.json`, `report.md`), written atomically.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

import numpy as np

from zoo.errors import ZooError
from zoo.deploy.export.isolation import ConversionProcess, InProcess
from zoo.deploy.formats.memory import weight_bytes
from zoo.deploy.export.planner import (CARD_SLOTS, PLAN_PARAMETERS, WARMUP_RECORDS, ExportPlan, OutputDirError, derive_signature_and_doc,
                                own_parameters, plan)
from zoo.deploy.export.report import ExportReport
from zoo.deploy.export.results import ArtifactResult, KerasReference
from zoo.deploy.export.verify import stochastic_outputs
from zoo.fileio import TMP_PREFIX
from zoo.deploy.formats import inputs, model_io
from zoo.deploy.formats.jobs import (CALIBRATION, REFERENCE, TEST, TEST_LABELS, VALIDATION, VALIDATION_LABELS, WARMUP,
                                     Job, ModelFacts)
from zoo.deploy.formats.runner import median

__all__ = ["OutputDirError", "execute", "export"]

# Keras runs again on this many of the test examples: outputs that then differ are stochastic (sampling or state
# in the model) and are verified on their statistics (`zoo.deploy.export.verify.compare`).
SECOND_RUN = 32


def export(model, out_dir, formats=None, *, process: ConversionProcess | None = None, isolate: bool = True,
           **plan_keywords) -> ExportReport:
    """Exports `model` to `formats` under `out_dir`, verifies each artifact and writes a report:
    `execute(plan(model, out_dir, formats, ...), process, isolate=isolate)`.

    Args:
        process: a `zoo.deploy.export.isolation.ConversionProcess` to reuse across exports (saves its start-up); not
            closed here.
        isolate: convert in a child process, so a converter crash fails only its own artifact (the default;
            False runs in this process, for debugging).
        The others: as `zoo.deploy.export.plan`'s.

    Plan keywords:
{plan}

    Format options (declared by the formats; None or absent means the default):
{options}

    Returns:
        An `ExportReport`; `report.ok` is False if any artifact failed. Failures are reported, not raised.
    """
    planned = plan(model, out_dir, **({} if formats is None else {"formats": formats}), **plan_keywords)
    return execute(planned, process=process, isolate=isolate)


def execute(plan: ExportPlan, process: ConversionProcess | None = None, *, isolate: bool = True) -> ExportReport:
    """Runs `plan` (see the module docstring). Never raises for a format's own failure."""
    t_start = time.perf_counter()
    if plan.verify and plan.scale_verification:
        plan = _scaled_verification(plan)
    model, data = plan.model, plan.data
    work = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}export-", dir=plan.out_dir))
    runners = _Runners(process, work, isolate)
    try:
        files = _data_files(plan, work)
        refs = _keras_outputs(model, plan.signature, dict(data.test_x))
        stochastic = stochastic_outputs(refs, _keras_outputs(model, plan.signature,
                                                             inputs.take(dict(data.test_x), 0, SECOND_RUN)))
        for i, value in enumerate(refs.values()):
            files[REFERENCE.format(i)] = _save(work, REFERENCE.format(i), value)
        keras_row = _keras_reference(model, plan.signature, refs, data.test_x, data.test_y,
                                     plan.latency_runs if plan.verify else 0)
        meta = plan.metadata
        if meta is not None and not _functional(model):  # a subclassed model's outputs are known now
            from zoo.deploy.formats import metadata as metadata_lib

            meta = metadata_lib.describe(model, class_names=meta.class_names, input=meta.input,
                                         signature=plan.signature, output_names=_widths(refs))
        facts = _model_facts_for_jobs(plan, refs, meta, work, stochastic)
        saved_model_dir = trace_error = None
        if not any(t.route == "tensorflow" for t in plan.targets):
            pass  # no SavedModel: every target converts on another route (`zoo.deploy.formats.routes`)
        elif _backend() == "tensorflow":
            saved_model_dir, trace_error = _write_saved_model(model, plan.signature, work, meta)
        elif facts.keras_file is None:
            saved_model_dir, trace_error = None, (f"a {_backend()}-backend model reaches TensorFlow's converters as "
                                                  f"a .keras file, and saving it failed: {facts.keras_file_error}")
        else:  # the converters are TensorFlow's: a TensorFlow-backend child writes the SavedModel
            saved_model_dir, trace_error = _write_saved_model_in_tensorflow(facts.keras_file, plan.signature, work,
                                                                            meta, plan.trust)
        results: list[ArtifactResult] = []
        for target in plan.targets:
            if trace_error and target.route == "tensorflow":  # nothing to convert: each artifact says why
                results.append(ArtifactResult(format=target.format, variant=target.variant,
                                              precision=target.precision, options=dict(target.options),
                                              error=trace_error, via=target.route))
                continue
            job = Job(target=target, model=facts, work_dir=str(work), data=files, saved_model_dir=saved_model_dir,
                      verify=plan.verify, latency_runs=plan.latency_runs, trust=plan.trust)
            results.append(runners.of(target.route).run(job, plan.timeout_s))
        if plan.verify:
            _mobile_clients(results, plan, refs, meta)
    finally:
        runners.close()
        shutil.rmtree(work, ignore_errors=True)

    report = ExportReport(
        model={**_model_facts(model, plan.signature, list(refs), plan.source, plan.recurrent, meta),
               "stochastic_outputs": list(stochastic)},
        data={**data.summary(), "quantization_aware": plan.quantization_aware},
        keras=keras_row, results=results, out_dir=str(plan.out_dir), card=dict(plan.card),
        timing={"export_s": sum(r.export_s for r in results), "verify_s": sum(r.verify_s for r in results),
                "wall_s": time.perf_counter() - t_start},
    )
    report.write(plan.out_dir)
    return report


class _Runners:
    """The conversion process of each route (`zoo.deploy.formats.routes`), started on first use on that route's
    Keras backend: Keras reads its backend once per process. A caller's `process` serves the default route."""

    def __init__(self, process: ConversionProcess | None, work: Path, isolate: bool):
        self._given, self._work, self._isolate, self._started = process, work, isolate, {}

    def of(self, route: str):
        from zoo.deploy.formats.routes import DEFAULT, get

        if not self._isolate:
            return InProcess()
        if route == DEFAULT and self._given is not None:
            return self._given
        if route not in self._started:
            self._started[route] = ConversionProcess(log_path=self._work / f"conversion_{route}.log",
                                                     backend=get(route).backend)
        return self._started[route]

    def close(self):
        for runner in self._started.values():
            runner.close()


def _seconds_per_input(model, signature, x) -> float:
    """Keras's time for one input, batch-1, the second call (the first traces)."""
    import tensorflow as tf

    fn = tf.function(lambda *args: model(*args, training=False))
    args = signature.pack({k: tf.constant(v) for k, v in inputs.for_keras(inputs.take(dict(x), 0, 1)).items()})
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy(), fn(*args))
        times.append(time.perf_counter() - t0)
    return times[-1]


def _scaled_verification(plan: ExportPlan) -> ExportPlan:
    """The plan with as many test inputs and latency runs as its checks need (`verify.sample_budget`), where the
    model's per-input cost makes the given count take minutes; the data's description says how many were used.
    A test-sample count the caller gave (`max_test_samples`, `--eval-samples`) is kept."""
    from zoo.deploy.export.verify import sample_budget

    data = plan.data
    given = inputs.count(data.test_x)
    if data.max_test_samples is not None or given <= 1 or _backend() != "tensorflow":
        return plan
    try:
        cost = _seconds_per_input(plan.model, plan.signature, data.test_x)
    except Exception:  # the model's own code: the export's tracing says so, with the full count
        return plan
    budget = sample_budget(given, plan.latency_runs, cost, {t.precision for t in plan.targets})
    if budget.reason is None:
        return plan
    n = budget.samples
    scaled = dataclasses.replace(data, test_x=MappingProxyType(inputs.take(dict(data.test_x), 0, n)),
                                 test_y=None if data.test_y is None else data.test_y[:n],
                                 description=f"{data.description}; {budget.reason}")
    return dataclasses.replace(plan, data=scaled, latency_runs=budget.latency_runs)


def _mobile_clients(results: list[ArtifactResult], plan: ExportPlan, refs: dict, meta) -> None:
    """The report's mobile client column (`zoo.deploy.export.mobile_check`): a `mobile` artifact the client refuses
    fails its verification."""
    from zoo.deploy.export import mobile_check
    from zoo.deploy.export.results import FAILED_VERIFICATION

    checks = mobile_check.check(results, dict(plan.data.test_x), refs, meta and meta.class_names,
                                random_data=plan.data.random)
    for r in results:
        found = checks.get(r.path)
        if found is None:
            continue
        r.details = {**(r.details or {}), "mobile_client": {**dataclasses.asdict(found), "text": found.text}}
        if found.accepted is False and r.options.get("mobile"):
            r.status = FAILED_VERIFICATION
            refused = f"made for the mobile clients, and {found.client} refused it: {found.why}"
            r.error = f"{r.error}; {refused}" if r.error else refused


def _data_files(plan: ExportPlan, work: Path) -> dict:
    """The data of each role, saved for the conversion process: role -> file."""
    data = plan.data
    named = {TEST: data.test_x, CALIBRATION: data.calibration_x, VALIDATION: data.validation_x,
             WARMUP: None if data.random else inputs.take(data.test_x, 0, WARMUP_RECORDS)}
    files = {role: inputs.save(work / f"{role}.npz", dict(x)) for role, x in named.items() if x is not None}
    for role, y in ((TEST_LABELS, data.test_y), (VALIDATION_LABELS, data.validation_y)):
        if y is not None:
            files[role] = _save(work, role, y)
    return files


def _model_facts_for_jobs(plan: ExportPlan, refs: dict, meta, work: Path, stochastic=()) -> ModelFacts:
    """What the conversion process knows of the model; the .keras file only where a route rebuilds it."""
    keras_file, why = ((plan.source, None) if plan.source and not plan.looped
                       else _save_model(plan.model, work, plan.needs_keras_file))
    return ModelFacts(name=plan.model.name, signature=plan.signature, output_names=tuple(refs),
                      layers=model_io.layer_classes(plan.model), recurrent=plan.recurrent,
                      quantization_aware=plan.quantization_aware, metadata=None if meta is None else meta.to_json(),
                      keras_file=keras_file, keras_file_error=why, params=int(plan.model.count_params()),
                      weight_bytes=weight_bytes(plan.model), stochastic=stochastic,
                      card={k: str(v) for k, v in plan.card.items() if k in CARD_SLOTS})


def _functional(model) -> bool:
    from zoo.deploy.formats.trace import is_functional

    return is_functional(model)


def _widths(refs: dict) -> dict:
    return {n: int(v.shape[-1]) if v.ndim > 1 else 1 for n, v in refs.items()}


def _save(work: Path, name: str, array) -> str:
    path = work / f"{name}.npy"
    np.save(path, np.asarray(array))
    return str(path)


def _save_model(model, work: Path, needed: bool) -> tuple[str | None, str | None]:
    """(a .keras file of the model, None), or (None, why not). Only the RNN routes rebuild the model from it,
    and the int8 guards read its layers."""
    if not needed:
        return None, "not needed: the model has no RNN layers and no int8 guard"
    from zoo.deploy.formats.model_io import without_config

    why = without_config(model)
    if why is not None:
        return None, (f"{why}: implement get_config() and from_config() (keras.io/guides/serialization_and_saving), "
                      "or build the model with the functional API")
    path = work / f"{model.name}.keras"
    try:
        model.save(path)
    except Exception as e:  # an unserializable custom layer
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
        return None, f"{type(e).__name__}: {first}"[:500]
    return str(path), None


def _write_saved_model(model, signature, work: Path, meta=None) -> tuple[str | None, str | None]:
    """(the export's SavedModel, None), or (None, why the model could not be traced)."""
    from zoo.deploy.formats.saved_model import export_saved_model

    path = work / "saved_model_default"
    try:
        export_saved_model(model, path, signature=signature, metadata=meta)
    except Exception as e:  # the model's own code fails to trace: every format fails alike, and says why
        return None, (f"tracing the model with inputs {signature.describe()} failed: "
                      f"{type(e).__name__}: {e}")[:2000]
    return str(path), None


def _backend() -> str:
    import keras

    return keras.backend.backend()


def _write_saved_model_in_tensorflow(keras_file, signature, work: Path, meta, trust):
    """`_write_saved_model` for a model on JAX or PyTorch: a child process on the TensorFlow backend loads its
    `.keras` file and writes the SavedModel every format converts from. The reference outputs stay the training
    backend's, computed here, so each artifact is verified against the backend the model was trained on."""
    import pickle
    import subprocess
    import sys

    from zoo.child_process import tensorflow_env

    request = work / "saved_model_request.pkl"
    with open(request, "wb") as f:
        pickle.dump({"keras_file": str(keras_file), "signature": signature, "work": str(work), "meta": meta,
                     "trust": trust}, f)
    env = tensorflow_env()
    code = ("import sys; from zoo import lean_imports; lean_imports.hold_back(); from zoo.deploy.export import exporter; "
            "exporter._saved_model_child(sys.argv[1])")
    done = subprocess.run([sys.executable, "-c", code, str(request)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        return None, f"writing the SavedModel on the TensorFlow backend failed: {tail}"[:2000]
    with open(request, "rb") as f:
        return pickle.load(f)


def _saved_model_child(request_path: str) -> None:
    """In a TensorFlow-backend child: the SavedModel of the `.keras` file a request names (see above)."""
    import pickle

    import keras

    from zoo.deploy.artifacts import load_model_file

    with open(request_path, "rb") as f:
        request = pickle.load(f)
    assert keras.backend.backend() == "tensorflow"
    model = load_model_file(request["keras_file"], trust=request["trust"], compile=False)
    result = _write_saved_model(model, request["signature"], Path(request["work"]), request["meta"])
    with open(request_path, "wb") as f:
        pickle.dump(result, f)


def _keras_outputs(model, signature, x: dict) -> dict:
    """Keras's outputs on the named inputs, by output name (`zoo.deploy.formats.trace.name_outputs`)."""
    from zoo.deploy.formats.runner import join_batches
    from zoo.deploy.formats.trace import name_outputs

    x = inputs.for_keras(x)
    args = signature.pack(x)
    if len(args) == 1:
        outputs = model.predict(args[0], batch_size=256, verbose=0)
    else:  # several positional arguments: model.predict takes one
        parts = [model(*signature.pack(inputs.take(x, i, i + 256)), training=False)
                 for i in range(0, inputs.count(x), 256)]
        import keras

        outputs = keras.tree.map_structure(lambda *p: join_batches(p), *parts)
    named = name_outputs(model, outputs)
    return {name: (np.asarray(v, np.float32) if np.asarray(v).dtype.kind in "fiub" else np.asarray(v))
            for name, v in named.items()}


def _keras_reference(model, signature, refs, x, y, latency_runs) -> KerasReference:
    from zoo.deploy.export.verify import metrics

    row = KerasReference(**metrics(next(iter(refs.values())), y))
    if latency_runs and _backend() != "tensorflow":  # the training backend's own compiled predict step
        args = signature.pack(inputs.for_keras(inputs.take(dict(x), 0, 1)))
        batch = args[0] if len(args) == 1 else list(args)
        times = []
        for i in range(5 + latency_runs):
            t0 = time.perf_counter()
            model.predict_on_batch(batch)
            if i >= 5:
                times.append((time.perf_counter() - t0) * 1e3)
        row.latency_ms = median(times)
    elif latency_runs:
        import tensorflow as tf

        fn = tf.function(lambda *args: model(*args, training=False))
        args = signature.pack({k: tf.constant(v) for k, v in inputs.for_keras(inputs.take(dict(x), 0, 1)).items()})
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
    from zoo.deploy.formats.trace import describe_source

    described = [{"name": t.name, "shape": ["None" if d is None else d for d in t.shape], "dtype": t.dtype}
                 for t in signature.inputs]
    facts = {"name": model.name, "class": type(model).__name__, "params": int(model.count_params()),
             "source": source, "inputs": described, "input": described[0],
             "traced_from": signature.traced_from, "traced_from_text": describe_source(signature),
             "outputs": outputs, "recurrent_layers": sorted(set(model_io.recurrent_layers(model))) if recurrent else []}
    if meta is not None:  # what the artifacts carry (zoo.deploy.formats.metadata), for the model card
        facts.update(task=meta.task, class_names=list(meta.class_names) if meta.class_names else None,
                     input_meaning=meta.description, predictions_output=meta.output)
    with contextlib.suppress(ZooError):
        spec = registry.get_spec(model.name)
        facts.update(architecture=spec.name, family=spec.family, paper=spec.paper, task=spec.task)
    return facts


def _derive_export_signature() -> None:
    """`export`'s signature and docstring: `plan`'s keywords (and the format options) with `process` and
    `isolate` after `formats`."""
    import textwrap

    plan_params = PLAN_PARAMETERS
    extra = [p for p in own_parameters(export) if p.name in ("process", "isolate")]
    plan_args = plan.__doc__.split("Args:\n", 1)[1].split("\n    Format options", 1)[0]
    export.__doc__ = export.__doc__.replace("{plan}", textwrap.indent(textwrap.dedent(plan_args).rstrip(), " " * 8))
    derive_signature_and_doc(export, plan_params[:3] + extra + plan_params[3:])


_derive_export_signature()
