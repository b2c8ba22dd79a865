"""Inference benchmark: every runtime of `zoo.deploy.formats` against Keras and against Keras's own exporters.

For each model: build it (the MNIST models trained briefly, so accuracy means something),
export it once with `zoo.deploy.export.export` (SavedModel, LiteRT fp32/fp16/int8, ONNX, TF.js) and
with Keras's `model.export(format="litert" | "onnx")` (the peers), then time every runtime at
each batch size with `common.measure`. Rows carry the median latency, the throughput, achieved
GFLOP/s and its percentage of the fp32 matmul peak measured in the same run (`peak.py`), the
accuracy on the test set where one exists, and the parity with Keras (max abs diff, argmax
agreement, and the tolerance of its precision), through the export's own `zoo.deploy.export.verify.compare`.
Every artifact is opened with its format's own `open_runner`, so the benchmark measures exactly
what `zoo export` verifies.

    python scripts/benchmark.py inference                       # the full run (~15-20 min)
    python scripts/benchmark.py inference --quick --models lenet5
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import inference_report
from benchmarks.common import Timing, cpu_count, first_examples, machine, measure

markdown = inference_report.markdown
plots = inference_report.plots


@dataclasses.dataclass(frozen=True)
class Runtime:
    """One row family of the benchmark: Keras itself, or an artifact opened by its format's `open_runner`.

    `format` and `variant` name the artifact of `zoo.deploy.export.export` it runs; a peer (`peer_export`)
    runs the artifact of Keras's own `model.export(format=peer_export)` in the same runner, and is
    compared with our runtime `compared_with`.
    """

    name: str
    description: str
    format: str | None = None  # None: the Keras model itself
    variant: str | None = None
    threaded: bool = False  # timed at each of --threads (LiteRT); else at the machine's CPUs
    peer_export: str | None = None
    compared_with: str | None = None

    @property
    def exported(self) -> bool:
        return self.format is not None and self.peer_export is None

    @property
    def precision(self) -> str:
        """The tolerance class of its artifact (`zoo.deploy.export.verify.CRITERIA`)."""
        from zoo.deploy.formats import get_format

        return get_format(self.format).precision(self.variant) if self.exported else "float32"


RUNTIMES = {
    r.name: r
    for r in (
        Runtime("keras_call", "Keras `model(x, training=False)`, eager"),
        Runtime("keras_predict", "Keras `model.predict(x)`"),
        Runtime("saved_model", "TF SavedModel, its serving signature", "saved_model"),
        Runtime("litert_fp32", "LiteRT fp32, XNNPACK", "tflite", "float32", threaded=True),
        Runtime("litert_fp16", "LiteRT fp16 weights, XNNPACK", "tflite", "float16", threaded=True),
        Runtime("litert_int8", "LiteRT full int8, XNNPACK", "tflite", "int8", threaded=True),
        Runtime("onnx", "onnxruntime CPU (tf2onnx)", "onnx"),
        Runtime("tfjs", "TF.js in Node (wasm backend)", "tfjs", "float32"),
        Runtime("keras_litert", "Keras `model.export(format='litert')`, same LiteRT runner", "tflite",
                threaded=True, peer_export="litert", compared_with="litert_fp32"),
        Runtime("keras_onnx", "Keras `model.export(format='onnx')`, same onnxruntime runner", "onnx",
                peer_export="onnx", compared_with="onnx"),
    )
}


@dataclasses.dataclass(frozen=True)
class Case:
    """A benchmarked model: its input, and the recipe that trains it when it has a test set."""

    name: str
    recipe: str | None = None  # trained with this recipe's pipeline, `--train-epochs` epochs
    input_shape: tuple | None = None  # the registry's default if None
    heavy: bool = False  # fewer timed repetitions


CASES = {
    c.name: c
    for c in (
        Case("lenet5", recipe="mnist_fast"),
        Case("convnet_bn", recipe="mnist_fast"),
        Case("resnet20", input_shape=(32, 32, 3)),
        Case("mobilenet_v2", input_shape=(224, 224, 3), heavy=True),
        Case("resnet50", input_shape=(224, 224, 3), heavy=True),
        Case("lstm_classifier", recipe="mnist_lstm"),
    )
}
RANDOM_SAMPLES = 32  # inputs of the untrained models: parity with Keras only
CALIBRATION_SAMPLES = 200  # full-int8 calibration examples (from the training split)
# A pause before each runtime, so the previous one's worker threads (TF's spin-waiting pools) are
# parked before the next is timed: on two cores they otherwise slow it measurably.
SETTLE_S = 0.5
QUICK_TRAIN_STEPS = 100  # --quick: enough for confident predictions, so int8 argmax parity is meaningful


def add_arguments(parser) -> None:
    parser.add_argument("--models", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help=f"comma-separated, of {', '.join(RUNTIMES)}")
    parser.add_argument("--batch-sizes", default="1,32", help="comma-separated batch sizes (default 1,32)")
    parser.add_argument("--threads", default=None, help="LiteRT thread counts (default 1 and the machine's CPUs)")
    parser.add_argument("--budget-s", type=float, default=1.5, help="timed seconds per measurement (default 1.5)")
    parser.add_argument("--train-epochs", type=float, default=1.0,
                        help="epochs of the recipe the MNIST models train for (default 1)")
    parser.add_argument("--eval-samples", type=int, default=10000,
                        help="MNIST test examples for accuracy and parity (default 10000: the whole split)")
    parser.add_argument("--profile", default="resnet50",
                        help="model to profile at the largest batch ('none' to skip): onnxruntime's and TF's "
                             "profilers, time by op type")
    parser.add_argument("--profile-dir", default=None,
                        help="keep the TensorBoard profiler trace of the profiled model here")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke test: {QUICK_TRAIN_STEPS} training steps, 256 test examples, 0.2 s per measurement")


def _csv(text: str) -> list[str]:
    return [t.strip() for t in str(text).split(",") if t.strip()]


def _check_names(kind: str, names: list[str], allowed) -> list[str]:
    from zoo.errors import UnknownNameError

    for n in names:
        if n not in allowed:
            raise UnknownNameError(kind, n, list(allowed))
    return names


def run(args) -> dict:
    from benchmarks.flops import forward_flops
    from benchmarks.peak import matmul_peak_gflops

    models = _check_names("model", _csv(args.models), CASES)
    runtimes = _check_names("runtime", _csv(args.runtimes), RUNTIMES)
    batch_sizes = [int(b) for b in _csv(args.batch_sizes)]
    if not batch_sizes or min(batch_sizes) < 1:
        raise ValueError(f"batch sizes must be positive integers. Received: --batch-sizes={args.batch_sizes}")
    threads = [int(t) for t in _csv(args.threads)] if args.threads else sorted({1, cpu_count()})
    budget = 0.2 if args.quick else args.budget_s
    t_start = time.perf_counter()
    print("measuring the fp32 matmul peak ...", flush=True)
    peak = matmul_peak_gflops(sizes=(1024, 2048) if args.quick else (1024, 2048, 4096),
                              budget_s=0.3 if args.quick else 1.0)
    print(f"  peak {peak['gflops']:.0f} GFLOP/s (TF matmul {peak['size']}^2; numpy {peak['numpy_best']:.0f})",
          flush=True)
    work = Path(tempfile.mkdtemp(prefix="zoo-bench-inference-"))
    result = {"suite": "inference", "machine": machine(), "peak": peak, "models": {}, "rows": [],
              "runtimes": {r.name: r.description for r in RUNTIMES.values()},
              "settings": {"models": models, "runtimes": runtimes, "batch_sizes": batch_sizes, "threads": threads,
                           "budget_s": budget, "quick": bool(args.quick)}}
    try:
        for name in models:
            case = CASES[name]
            print(f"[{name}] preparing ...", flush=True)
            try:
                model, data = _prepare(case, args)
            except Exception as e:  # one model's failure is its result; the others still run
                result["models"][name] = {"error": _short(e)}
                print(f"[{name}] FAILED: {_short(e)}", flush=True)
                continue
            flops = forward_flops(model)
            info = {"params": int(model.count_params()), "input_shape": list(model.inputs[0].shape[1:]),
                    "flops_per_sample": flops, **data["info"]}
            print(f"[{name}] {flops / 1e6:.1f} MFLOPs/sample; exporting ...", flush=True)
            artifacts = _export(model, name, data, work / name, runtimes, args)
            info["artifacts"] = {k: {kk: v for kk, v in a.items() if kk != "path"} for k, a in artifacts.items()}
            result["models"][name] = info
            rows = _measure_model(case, model, data, artifacts, runtimes, batch_sizes, threads, budget,
                                  flops, peak["gflops"])
            result["rows"].extend(rows)
            if args.profile == name:
                from benchmarks.profile import profile_model

                print(f"[{name}] profiling ...", flush=True)
                result["profile"] = profile_model(model, artifacts, max(batch_sizes), flops,
                                                  trace_dir=args.profile_dir)
            _free(model)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not args.quick:  # the machine's state drifts over a long run: the better of two peaks, rows rescaled
        again = matmul_peak_gflops(budget_s=1.0)
        result["peak_at_end"] = again
        if again["gflops"] > peak["gflops"]:
            result["peak"] = {**again, "at_start": peak["gflops"], "note": "the better of the start and end runs"}
            for row in result["rows"]:
                if row.get("gflops") is not None:
                    row["pct_peak"] = round(100 * row["gflops"] / again["gflops"], 2)
    result["targets"] = inference_report.targets(result)
    result["wall_s"] = round(time.perf_counter() - t_start, 1)
    return result


# --- models and data ------------------------------------------------------------------------------


def _prepare(case: Case, args):
    """(model, data): data has eval_x, eval_y (or None), rep_x and `info` saying where they came from."""
    from zoo.architectures import registry

    if case.recipe is None:
        model = registry.build(case.name, input_shape=case.input_shape)
        shape = tuple(model.inputs[0].shape[1:])
        rng = np.random.default_rng(0)
        eval_x = rng.standard_normal((RANDOM_SAMPLES, *shape), dtype=np.float32)
        rep_x = rng.standard_normal((RANDOM_SAMPLES, *shape), dtype=np.float32)
        info = {"weights": "random (untrained)", "eval": f"{RANDOM_SAMPLES} random-normal inputs: parity with Keras only"}
        return model, {"eval_x": eval_x, "eval_y": None, "rep_x": rep_x, "info": info}
    return _train(case, args)


def _train(case: Case, args):
    """Trains briefly with the recipe's pipeline; returns the model and the test split as arrays."""
    import math

    from zoo.architectures import registry
    from zoo.training import load_recipe
    from zoo.training.run import build_and_compile, load_splits

    config = load_recipe(case.recipe, model=case.name, export_dir=None, val_split=None)
    if config.model != case.name:
        config = config.replace(model=case.name)
    train_ds, _, test_ds = load_splits(config)
    steps = int(train_ds.cardinality())
    steps = QUICK_TRAIN_STEPS if args.quick else max(1, math.ceil(steps * args.train_epochs))
    config = config.replace(epochs=1)
    spec = registry.get_spec(case.name)
    model = build_and_compile(config, spec.input_shape, spec.num_classes, steps)
    t0 = time.perf_counter()
    model.fit(train_ds.repeat().take(steps), epochs=1, verbose=0)
    train_s = time.perf_counter() - t0
    limit = 256 if args.quick else args.eval_samples
    eval_x, eval_y = first_examples(test_ds, limit)
    rep_x, _ = first_examples(train_ds, CALIBRATION_SAMPLES)
    info = {"weights": f"trained {steps} steps of recipe {case.recipe} (batch {config.batch_size}, {train_s:.0f} s)",
            "eval": f"{config.dataset} test split, first {len(eval_x)} examples"}
    return model, {"eval_x": eval_x, "eval_y": eval_y, "rep_x": rep_x, "info": info}


def _free(model) -> None:
    import gc

    import keras

    del model
    keras.backend.clear_session()
    gc.collect()


# --- export -----------------------------------------------------------------------------------------


def _export(model, name: str, data: dict, out: Path, runtimes: list[str], args) -> dict:
    """Runtime name -> {path, route, error, export_s}: our export once, then the peers."""
    from zoo.deploy.export import ExportData, export

    wanted = [RUNTIMES[r] for r in runtimes]
    formats = sorted({r.format for r in wanted if r.exported})
    quantization = [r.variant for r in wanted if r.exported and r.format == "tflite"]
    artifacts = {}
    if formats:
        t0 = time.perf_counter()
        test = (data["eval_x"][:RANDOM_SAMPLES], data["eval_y"][:RANDOM_SAMPLES]) if data["eval_y"] is not None \
            else data["eval_x"][:RANDOM_SAMPLES]
        int8 = "int8" in quantization
        report = export(model, out / "zoo", formats=formats, precision=quantization or None,
                        data=ExportData(calibration=data["rep_x"] if int8 else None, test=test),
                        calibration_samples=len(data["rep_x"]) if int8 else None, verify=False, latency_runs=0)
        print(f"[{name}]   zoo.deploy.export.export: {time.perf_counter() - t0:.0f} s", flush=True)
        for r in wanted:
            if not r.exported:
                continue
            res = next((x for x in report.results if x.format == r.format
                        and (r.variant is None or x.variant == r.variant)), None)
            if res is None:
                continue
            ok = res.path and not res.error
            artifacts[r.name] = {"path": res.path if ok else None, "route": res.route,
                                 "error": None if ok else (res.error or res.status), "export_s": round(res.export_s, 1)}
    for r in wanted:
        if r.peer_export is None:
            continue
        path = out / "keras" / f"model.{'tflite' if r.peer_export == 'litert' else r.peer_export}"
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        try:
            model.export(str(path), format=r.peer_export, verbose=False)
            artifacts[r.name] = {"path": str(path), "route": None, "error": None}
        except Exception as e:  # "where they fail, say so": the error is the result
            artifacts[r.name] = {"path": None, "route": None, "error": _short(e)}
        artifacts[r.name]["export_s"] = round(time.perf_counter() - t0, 1)
        print(f"[{name}]   model.export(format={r.peer_export!r}): "
              f"{'ok' if artifacts[r.name]['path'] else 'FAILED: ' + artifacts[r.name]['error']}", flush=True)
    return artifacts


def _short(e: Exception, limit: int = 300) -> str:
    """The error's type and last line, to its first full sentence when that is long."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    text = lines[-1] if lines else ""
    if len(text) > 160 and ". " in text[60:]:
        text = text[: text.index(". ", 60) + 1]
    return f"{type(e).__name__}: {text}"[:limit]


# --- measurement ------------------------------------------------------------------------------------


def _batch(x: np.ndarray, size: int) -> np.ndarray:
    """`size` examples of `x`, cycling when `x` has fewer."""
    return np.ascontiguousarray(np.take(x, np.arange(size) % len(x), axis=0))


class KerasHandle:
    """The Keras model itself, called (`model(x)`) or through `model.predict`."""

    note = ""

    def __init__(self, model, how: str):
        if how not in ("call", "predict"):
            raise ValueError(f"how must be 'call' or 'predict'. Received: how={how!r}")
        self._model, self._how = model, how

    def _run(self, x):
        if self._how == "call":
            return np.asarray(self._model(x, training=False))
        return self._model.predict(x, batch_size=len(x), verbose=0)

    def outputs(self, x):
        return np.concatenate([self._run(x[i : i + 256]) for i in range(0, len(x), 256)])

    def time(self, x, **measure_args) -> Timing:
        return measure(lambda: self._run(x), **measure_args)


class RunnerHandle:
    """An artifact opened by its format's `open_runner`; its first output is the one compared."""

    def __init__(self, runner):
        self._runner = runner

    @property
    def note(self) -> str:  # read after a run: TF.js knows its backend only then
        return self._runner.note

    def outputs(self, x):
        return next(iter(self._runner.predict(x).values()))

    def time(self, x, **measure_args) -> Timing:
        if hasattr(self._runner, "timed_calls_ms"):  # TF.js: timed inside Node, no process start-up
            times = self._runner.timed_calls_ms(x, runs=measure_args.get("max_reps", 1000),
                                                warmup=measure_args.get("warmup", 2),
                                                budget_s=measure_args.get("budget_s"),
                                                min_runs=measure_args.get("min_reps", 3))
            return Timing(times)
        return measure(lambda: self._runner.predict(x), **measure_args)


def open_handle(runtime: Runtime, model, path: str | None, threads: int | None, example: np.ndarray):
    """`runtime` ready to run: the Keras model, or its artifact at `path` in its format's runtime."""
    if runtime.format is None:
        return KerasHandle(model, runtime.name.removeprefix("keras_"))
    from zoo.deploy.formats import get_format

    return RunnerHandle(get_format(runtime.format).open_runner(path, threads=threads or cpu_count(), example=example))


def _measure_model(case, model, data, artifacts, runtimes, batch_sizes, threads, budget, flops, peak) -> list[dict]:
    from zoo.deploy.export.verify import accuracy, compare

    eval_x, eval_y = data["eval_x"], data["eval_y"]
    reference = np.concatenate([model.predict(eval_x[i : i + 256], verbose=0) for i in range(0, len(eval_x), 256)])
    keras_accuracy = accuracy(reference, eval_y) if eval_y is not None else None
    rows = []
    for name in runtimes:
        runtime = RUNTIMES[name]
        art = artifacts.get(name, {})
        for t in (threads if runtime.threaded else [None]):
            base = {"model": case.name, "runtime": name, "threads": t or cpu_count(), "peer": bool(runtime.peer_export),
                    "precision": runtime.precision, "route": art.get("route"), "exported": runtime.exported,
                    "threaded": runtime.threaded, "compared_with": runtime.compared_with}
            if runtime.format is not None and not art.get("path"):
                error = art.get("error") or "not exported"
                rows += [{**base, "batch": b, "status": "failed", "error": error} for b in batch_sizes]
                print(f"[{case.name}]   {name} x{base['threads']}: FAILED to export: {error}", flush=True)
                continue
            time.sleep(SETTLE_S)
            try:
                handle = open_handle(runtime, model, art.get("path"), t, eval_x[:1])
                comparison = compare({"output": handle.outputs(eval_x)}, {"output": reference}, runtime.precision,
                                     eval_y)
            except Exception as e:
                rows += [{**base, "batch": b, "status": "failed", "error": _short(e)} for b in batch_sizes]
                print(f"[{case.name}]   {name} x{base['threads']}: FAILED {_short(e)}", flush=True)
                continue
            parity = {"max_abs_diff": comparison.max_abs_diff, "argmax_agreement": comparison.argmax_agreement,
                      "parity_ok": comparison.passed, "criterion": comparison.criterion,
                      "accuracy": comparison.accuracy, "keras_accuracy": keras_accuracy}
            for b in batch_sizes:
                row = {**base, "batch": b, **parity, "note": handle.note or None}
                try:
                    heavy = case.heavy and b > 1
                    timing = handle.time(_batch(eval_x, b), warmup=1 if heavy else 2, min_reps=3 if heavy else 5,
                                         max_reps=2000, budget_s=budget)
                except Exception as e:
                    rows.append({**row, "status": "failed", "error": _short(e)})
                    continue
                median_s = timing.median_ms / 1e3
                gflops = flops * b / median_s / 1e9
                row.update(status="ok", median_ms=round(timing.median_ms, 4), p90_ms=round(timing.p90_ms, 4),
                           reps=timing.reps, throughput_per_s=round(b / median_s, 2), gflops=round(gflops, 2),
                           pct_peak=round(100 * gflops / peak, 2))
                rows.append(row)
                print(f"[{case.name}]   {name:13s} x{base['threads']} b{b:<3d} {timing.median_ms:9.3f} ms "
                      f"{b / median_s:10.1f}/s {100 * gflops / peak:5.1f}% peak"
                      + (f"  acc {parity['accuracy']:.4f}" if parity.get("accuracy") is not None else ""), flush=True)
            del handle
    return rows
