"""Quantization benchmark: accuracy, size and batch-1/batch-32 latency per runtime and precision.

int8 comes from post-training quantization, from quantization-aware training and within an accuracy
budget; every ratio is against float32 in the same runtime, in the same run.

For each model: train it with its recipe (or load `--from NAME=PATH.keras`), fine-tune a copy
quantization-aware (`zoo train --qat-from`, `--qat-epochs`), export both with `zoo.deploy.export.export`
(TFLite float32/float16/int8, ONNX float32/float16/int8, OpenVINO float32/float16/int8, each verified on
the whole test split), export int8 once more with `--max-accuracy-drop`, then time every artifact with
each runtime's own runner at batch 1 and 32 (`common.measure`, all the machine's cores).

    python scripts/benchmark.py quantization                # convnet_bn (default recipe), resnet20, mobilenet_v2
    python scripts/benchmark.py quantization --models convnet_bn --quick
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import ROOT, cpu_count, first_examples, machine, markdown_table, measure

RUNTIMES = ("tflite", "onnx", "openvino")
PRECISIONS = ("float32", "float16", "int8")
STUDY_DIR = ROOT / "results" / "quantization"


@dataclasses.dataclass(frozen=True)
class Case:
    """A benchmarked model: how it trains (a recipe and changes to it) and how its QAT copy fine-tunes."""

    name: str
    changes: dict  # TrainConfig fields over the default recipe's
    qat_lr: float  # the fine-tuning learning rate (a tenth of the training peak, as QAT fine-tuning usually uses)
    note: str = ""
    float_finetune: dict | None = None  # a second float run from the first's weights (`--weights`), these changes


CASES = {
    c.name: c
    for c in (
        Case("convnet_bn", {}, 1e-3, "the default recipe's model (mnist_fast)"),
        Case("resnet20", {"model": "resnet20", "dataset": "mnist32", "epochs": 1, "batch_size": 128, "lr": 3e-3},
             3e-4, "He et al. 2016's CIFAR ResNet-20 on MNIST in CIFAR's shape"),
        Case("mobilenet_v2", {"model": "mobilenet_v2", "dataset": "mnist32", "epochs": 2, "batch_size": 128,
                              "lr": 3e-3, "model_overrides": {"alpha": 0.35, "bn_momentum": 0.99}},
             3e-4, "MobileNetV2 x0.35 (depthwise), MNIST in CIFAR's shape"),
        # Where post-training int8 loses >= 1 point (results/quantization/ptq_search.md): a quarter-width ResNet-20
        # short of convergence. One epoch at 3e-3 leaves half its channels dead (53%); a second at 3e-4 brings it
        # to 87%, with PTQ int8 1.6 (ONNX) to 3.6 (TFLite) points lower. Converged (97.7%), PTQ loses nothing.
        Case("resnet20_w4", {"model": "resnet20", "dataset": "mnist32", "epochs": 1, "batch_size": 128, "lr": 3e-3,
                             "model_overrides": {"base_filters": 4}},
             3e-4, "ResNet-20 x0.25 (4-8-16 channels) short of convergence, MNIST in CIFAR's shape",
             float_finetune={"epochs": 1, "lr": 3e-4}),
    )
}
DEFAULT_CASES = ("convnet_bn", "resnet20", "mobilenet_v2")
CALIBRATION_SAMPLES = 200


def add_arguments(parser) -> None:
    parser.add_argument("--models", default=",".join(DEFAULT_CASES),
                        help=f"comma-separated, of {', '.join(CASES)} (default {','.join(DEFAULT_CASES)}); the rows of "
                             "models not run are kept from the committed results")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help=f"comma-separated, of {', '.join(RUNTIMES)}")
    parser.add_argument("--from", dest="trained", action="append", default=[], metavar="NAME=PATH.keras",
                        help="use this trained float model for NAME instead of training it")
    parser.add_argument("--qat-from", dest="qat_trained", action="append", default=[], metavar="NAME=PATH.keras",
                        help="use this quantization-aware model for NAME instead of fine-tuning one")
    parser.add_argument("--qat-epochs", type=int, default=1, help="quantization-aware fine-tuning epochs (default 1)")
    parser.add_argument("--same-budget-float", action=argparse.BooleanOptionalAction, default=True,
                        help="also fine-tune the float model as long as QAT, without quantization, and export it "
                             "float32 and PTQ int8: QAT's gain net of the extra training (default on)")
    parser.add_argument("--max-accuracy-drop", type=float, default=0.2,
                        help="the accuracy budget of the budgeted int8 rows, in points (default 0.2)")
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--budget-s", type=float, default=1.5, help="timed seconds per measurement (default 1.5)")
    parser.add_argument("--eval-samples", type=int, default=10000, help="test examples (default: the whole split)")
    parser.add_argument("--study-dir", default=str(STUDY_DIR),
                        help="where the PTQ-vs-QAT accuracy table goes (default results/quantization)")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 60 training steps, 512 test examples")


def _pairs(items) -> dict:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            raise ValueError(f"expected NAME=PATH.keras, got {item!r}")
        out[name] = path
    return out


def run(args) -> dict:
    from zoo.errors import UnknownNameError

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    runtimes = [n.strip() for n in args.runtimes.split(",") if n.strip()]
    for kind, values, allowed in (("model", names, CASES), ("runtime", runtimes, RUNTIMES)):
        for v in values:
            if v not in allowed:
                raise UnknownNameError(f"quantization benchmark {kind}", v, allowed)
    batches = [int(b) for b in args.batch_sizes.split(",")]
    trained, qat_trained = _pairs(args.trained), _pairs(args.qat_trained)
    work = Path(tempfile.mkdtemp(prefix="zoo-quant-bench-"))
    rows, studies, budgets, models = [], [], [], {}
    try:
        for name in names:
            case = CASES[name]
            print(f"[{name}] training", flush=True)
            float_path, qat_path, control_path, data, info = _models(case, args, work, trained.get(name),
                                                                     qat_trained.get(name))
            models[name] = {"note": case.note, **info}
            for source, path, precisions, extra in (
                ("ptq", float_path, PRECISIONS, {}),
                ("qat", qat_path, ("int8",), {}),
                ("budget", float_path, ("int8",), {"max_accuracy_drop": args.max_accuracy_drop}),
                ("float_ft", control_path, ("float32", "int8"), {}),
            ):
                if path is None:
                    continue
                print(f"[{name}] export {source}", flush=True)
                report = _export(path, work / name / source, runtimes, precisions, data, extra)
                for r in report.results:
                    row = _row(name, source, r, report)
                    if r.path and r.status in ("passed", "exported", "failed_verification"):  # it exists: time it
                        print(f"[{name}]   time {r.label} ({source})", flush=True)
                        row.update(_latency(r, data["eval_x"], batches, args))
                    rows.append(row)
                    if source == "budget" and r.details:
                        budgets.append({"model": name, "runtime": r.format, **_budget_summary(r.details)})
            studies.append(_study_row(name, rows))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _ratios(rows, batches)
    rows, studies, budgets, models = _merged(names, rows, studies, budgets, models, args)
    result = {
        "suite": "quantization",
        "machine": {**machine(), **_versions()},
        "settings": {"models": list(models), "runtimes": [r for r in RUNTIMES if r in runtimes or any(
                         row["runtime"] == r for row in rows)], "batch_sizes": batches, "threads": cpu_count(),
                     "budget_s": args.budget_s, "max_accuracy_drop": args.max_accuracy_drop,
                     "qat_epochs": args.qat_epochs, "quick": args.quick, "same_budget_float": args.same_budget_float},
        "models": models,
        "rows": rows,
        "study": studies,
        "budgets": budgets,
        "targets": _targets(rows),
    }
    _write_study(result, Path(args.study_dir))
    return result


def _versions() -> dict:
    """The quantization stack's versions, and whether the CPU has VNNI (int8 dot products, which the int8
    kernels of all three runtimes use)."""
    import importlib.metadata as md

    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except OSError:
        pass
    out = {"vnni": sorted(f for f in flags if "vnni" in f)}
    for name in ("openvino", "nncf", "ai-edge-quantizer"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _models(case: Case, args, work: Path, float_path: str | None, qat_path: str | None):
    """(float .keras, QAT .keras, same-budget float .keras or None, data arrays, facts): trained here unless given."""
    import zoo.data
    from zoo.training import load_recipe, train
    from zoo.training.config import DEFAULT_RECIPE

    config = load_recipe(DEFAULT_RECIPE, **case.changes).replace(
        out=str(work / "runs"), export_dir=None, val_split=None, backup_every=None, verbose=0)
    if args.quick:
        config = config.replace(epochs=1, train_split="train[:7680]")
    facts = {"dataset": config.dataset, "recipe": DEFAULT_RECIPE, "changes": case.changes}
    if float_path is None:
        t0 = time.perf_counter()
        result = train(config)
        float_path = str(result.run_dir / "last.keras")
        keep = work / f"{case.name}_float.keras"
        shutil.copyfile(float_path, keep)
        float_path = str(keep)
        facts["float_train_s"] = round(time.perf_counter() - t0, 1)
        if case.float_finetune:  # the second float stage, from the first's weights
            t0 = time.perf_counter()
            result = train(config.replace(weights=float_path, out=str(work / "runs_float2"), **case.float_finetune))
            float_path = str(work / f"{case.name}_float2.keras")
            shutil.copyfile(result.run_dir / "last.keras", float_path)
            facts.update(float_finetune=case.float_finetune, float_finetune_s=round(time.perf_counter() - t0, 1))
    else:
        facts["float_from"] = float_path
    if qat_path is None:
        qat_config = config.replace(qat_from=float_path, epochs=args.qat_epochs, lr=case.qat_lr,
                                    out=str(work / "runs_qat"))
        t0 = time.perf_counter()
        result = train(qat_config)
        qat_path = str(result.run_dir / "last.keras")
        facts.update(qat_train_s=round(time.perf_counter() - t0, 1), qat_epochs=qat_config.epochs,
                     qat_lr=qat_config.lr)
    else:
        facts["qat_from"] = qat_path
    control_path = None
    if args.same_budget_float:  # the same fine-tuning without fake quantization
        t0 = time.perf_counter()
        result = train(config.replace(weights=float_path, epochs=args.qat_epochs, lr=case.qat_lr,
                                      out=str(work / "runs_same_budget")))
        control_path = str(result.run_dir / "last.keras")
        facts["same_budget_float_s"] = round(time.perf_counter() - t0, 1)
    limit = 512 if args.quick else args.eval_samples
    data = {}
    data["eval_x"], data["eval_y"] = first_examples(zoo.data.load(config.dataset, "test", 1000), limit)
    data["rep_x"], _ = first_examples(zoo.data.load(config.dataset, "train", 100, seed=1), CALIBRATION_SAMPLES)
    # The accuracy budget measures on held-out training examples, never on the test split it is judged on.
    data["val_x"], data["val_y"] = first_examples(zoo.data.load(config.dataset, "train[-10%:]", 1000), 2000 if args.quick
                                           else 6000)
    return float_path, qat_path, control_path, data, facts


def _export(model_path, out: Path, runtimes, precisions, data, extra):
    """`extra`: format options; an int8 guard measures on the validation split."""
    from zoo.deploy.export import ExportData, export

    return export(model_path, out, runtimes, precision=precisions,
                  data=ExportData(calibration=data["rep_x"], test=(data["eval_x"], data["eval_y"]),
                                  validation=(data["val_x"], data["val_y"]) if extra else None),
                  calibration_samples=len(data["rep_x"]), latency_runs=0, **extra)


def _row(model: str, source: str, r, report) -> dict:
    v = r.verification
    return {
        "model": model, "runtime": r.format, "precision": r.variant, "int8_from": source if r.variant == "int8" or source == "float_ft" else "",
        "status": r.status, "accuracy": v.accuracy if v else None, "keras_accuracy": report.keras.accuracy,
        "argmax_agreement": v.argmax_agreement if v else None, "size_bytes": r.size_bytes,
        "error": r.error, "float_layers": (r.details or {}).get("float_layers"),
    }


def _latency(r, x: np.ndarray, batches, args) -> dict:
    from zoo.deploy.formats import get_format

    fmt = get_format(r.format)
    out = {}
    runner = fmt.open_runner(r.path, threads=cpu_count(), example=x[:1])
    out["runner"] = runner.runtime
    for b in batches:
        xb = np.ascontiguousarray(x[:b])
        timing = measure(lambda: runner.predict(xb), warmup=3, budget_s=0.3 if args.quick else args.budget_s)
        out[f"latency_b{b}_ms"] = round(timing.median_ms, 4)
    return out


def _ratios(rows, batches) -> None:
    """Size and speed of every artifact relative to float32 of the same model and runtime (same run)."""
    for row in rows:
        base = next((b for b in rows if b["model"] == row["model"] and b["runtime"] == row["runtime"]
                     and b["precision"] == "float32" and b["int8_from"] == "" and b.get("latency_b1_ms")), None)
        if base is None or not row.get("size_bytes"):
            continue
        row["size_vs_float32"] = round(row["size_bytes"] / base["size_bytes"], 3)
        for b in batches:
            key = f"latency_b{b}_ms"
            if row.get(key) and base.get(key):
                row[f"speedup_b{b}"] = round(base[key] / row[key], 2)
        if row.get("accuracy") is not None and base.get("accuracy") is not None:
            row["accuracy_drop_points"] = round(100 * (base["accuracy"] - row["accuracy"]), 2)


def _budget_summary(details: dict) -> dict:
    return {k: details.get(k) for k in ("budget_points", "full_int8_drop", "final_drop", "within_budget",
                                        "float_layers", "size_bytes", "latency_ms", "validation_samples")}


def _study_row(name: str, rows) -> dict:
    """Float vs PTQ int8 vs QAT int8 accuracy, per runtime, for one model."""
    out = {"model": name}
    for row in rows:
        # An int8 artifact that fails the 99% argmax-agreement check still has its measured accuracy: keep it.
        if row["model"] != name or row.get("accuracy") is None:
            continue
        key = {"float32": "float32"}.get(row["precision"]) if not row["int8_from"] else f"{row['int8_from']}_int8"
        if row["int8_from"] == "float_ft" and row["precision"] == "float32":
            key = "float_ft_float32"
        if key:
            out[f"{row['runtime']}_{key}"] = row["accuracy"]
    return out


def _targets(rows) -> list[dict]:
    """The issue's bars: int8 >= 1.5x float32 at batch 32 with <= 0.5 points lost, per model and runtime."""
    out = []
    for row in rows:
        if row["precision"] != "int8" or row["int8_from"] != "ptq" or row.get("speedup_b32") is None:
            continue
        drop = row.get("accuracy_drop_points")
        out.append({"model": row["model"], "runtime": row["runtime"], "speedup_b32": row["speedup_b32"],
                    "accuracy_drop_points": drop,
                    "met": row["speedup_b32"] >= 1.5 and drop is not None and drop <= 0.5})
    return out


def _write_study(result: dict, folder: Path) -> None:
    from zoo.fileio import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    payload = {"machine": result["machine"], "settings": result["settings"], "models": result["models"],
               "study": result["study"], "budgets": result["budgets"]}
    atomic_write_text(folder / "ptq_vs_qat.json", json.dumps(payload, indent=2, default=str) + "\n")
    atomic_write_text(folder / "README.md", _study_markdown(result))


def _pct(v):
    return None if v is None else round(100 * v, 2)


def _study_markdown(result: dict) -> str:
    lines = ["# Quantization: float vs post-training int8 vs quantization-aware int8", "",
             "Written by `python scripts/benchmark.py quantization` (with the speed table in `benchmarks/results/quantization.md`). "
             "Accuracy (%) on the whole test split, each artifact run in its own runtime. Models on which "
             "post-training int8 loses at least 1 point were searched for by `python scripts/benchmark.py quantization-search` "
             "(`results/quantization/ptq_search.md`).", ""]
    study = []
    for s in result["study"]:
        for runtime in result["settings"]["runtimes"]:
            f, p, q, c, cp = (s.get(f"{runtime}_{k}") for k in ("float32", "ptq_int8", "qat_int8", "float_ft_float32",
                                                                 "float_ft_int8"))
            if f is None:
                continue
            study.append({"model": s["model"], "runtime": runtime, "float": _pct(f), "ptq": _pct(p), "qat": _pct(q),
                          "ptq_loss": None if p is None else round(100 * (f - p), 2),
                          "qat_loss": None if q is None else round(100 * (f - q), 2),
                          "control": _pct(c), "control_ptq": _pct(cp),
                          "qat_vs_control": None if q is None or c is None else round(100 * (c - q), 2)})
    columns = [("model", "model"), ("runtime", "runtime"), ("float", "float32 %"), ("ptq", "PTQ int8 %"),
               ("ptq_loss", "PTQ loss (points)"), ("qat", "QAT int8 %"), ("qat_loss", "QAT loss (points)")]
    if any(row["control"] is not None for row in study):
        columns += [("control", "same-budget float32 %"), ("control_ptq", "its PTQ int8 %"),
                    ("qat_vs_control", "QAT loss vs it (points)")]
    lines.append(markdown_table(study, columns))
    if any(row["control"] is not None for row in study):
        lines += ["", "Same-budget float: the float model fine-tuned exactly as QAT fine-tunes it (epochs, learning "
                  "rate), without fake quantization. Where the float model is short of convergence, QAT's extra "
                  "training alone raises accuracy; the last column is QAT's loss net of that."]
    lines += ["", "## int8 within an accuracy budget", ""]
    budget_rows = [{**b, "float_layers": ", ".join(b.get("float_layers") or []) or "none",
                    "size": f"{(b.get('size_bytes') or {}).get('chosen', 0) / 1024:.0f} KB vs "
                            f"{(b.get('size_bytes') or {}).get('int8', 0) / 1024:.0f} KB int8"
                    if b.get("size_bytes") else "", "latency": _budget_latency(b.get("latency_ms"))}
                   for b in result["budgets"]]
    lines.append(markdown_table(budget_rows, [("model", "model"), ("runtime", "runtime"),
                                              ("budget_points", "budget (points)"), ("full_int8_drop", "full int8 drop"),
                                              ("final_drop", "final drop"), ("within_budget", "within"),
                                              ("float_layers", "layers kept float"), ("size", "size"),
                                              ("latency", "latency")]))
    return "\n".join(lines) + "\n"


def _budget_latency(latency) -> str:
    """'0.41 ms vs 0.38 ms int8' from the budget's {chosen, int8, ...} latencies, where it measured them."""
    if not isinstance(latency, dict) or latency.get("chosen") is None or latency.get("int8") is None:
        return ""
    return f"{latency['chosen']:.3g} ms vs {latency['int8']:.3g} ms int8"


def _merged(names, rows, studies, budgets, models, args):
    """This run's models plus the committed results' other models (`--models a` re-measures a, keeps the rest)."""
    try:
        old = json.loads((Path(args.results) / "quantization.json").read_text())
    except (AttributeError, OSError, ValueError):
        return rows, studies, budgets, models
    if old.get("machine", {}).get("cpu_model") != machine().get("cpu_model") or getattr(args, "quick", False):
        return rows, studies, budgets, models
    keep = [m for m in old.get("models", {}) if m not in names and m in CASES]
    rows = [r for r in old.get("rows", []) if r["model"] in keep] + rows
    studies = [s for s in old.get("study", []) if s["model"] in keep] + studies
    budgets = [b for b in old.get("budgets", []) if b["model"] in keep] + budgets
    models = {**{m: old["models"][m] for m in keep}, **models}
    return rows, studies, budgets, models


def markdown(result: dict) -> str:
    m = result["machine"]
    s = result["settings"]
    lines = ["# Quantization benchmark", "",
             f"Machine: {m.get('cpu_model')}, {m.get('cpus')} CPUs; TF {m.get('tensorflow')}, LiteRT "
             f"{m.get('ai-edge-litert')}, onnxruntime {m.get('onnxruntime')}, OpenVINO {m.get('openvino')}, NNCF "
             f"{m.get('nncf')}. Threads: {s['threads']} per runtime. Latency: median per call after warm-up "
             f"({s['budget_s']} s per measurement). Ratios are against float32 of the same model and runtime, "
             "measured in this run. int8 from: ptq = post-training (calibrated on 200 training examples), qat = "
             f"quantization-aware fine-tuning ({s['qat_epochs']} epoch), budget = PTQ with the layers that cost most "
             f"kept float (--max-accuracy-drop {s['max_accuracy_drop']}), float_ft = the float model fine-tuned as long as "
             "QAT without fake quantization (its float32 and PTQ int8: the same-budget control).", ""]
    for name, facts in result["models"].items():
        trained = (f"float weights {facts['float_from']}" if facts.get("float_from")
                   else f"trained by the recipe with {facts.get('changes') or 'no changes'} ({facts.get('float_train_s')} s)")
        qat = (f"QAT copy {facts['qat_from']}" if facts.get("qat_from") else
               f"QAT: {facts.get('qat_epochs')} epoch at lr {facts.get('qat_lr')} ({facts.get('qat_train_s')} s)")
        if facts.get("float_finetune"):
            trained += f", then from its weights with {facts['float_finetune']} ({facts.get('float_finetune_s')} s)"
        lines.append(f"- **{name}**: {facts.get('note')}; dataset {facts.get('dataset')}; {trained}; {qat}")
    lines += ["", "## Per runtime and precision", ""]
    rows = [{**r, "accuracy_pct": _pct(r.get("accuracy")), "size_kb": None if r.get("size_bytes") is None
             else round(r["size_bytes"] / 1024, 1)} for r in result["rows"]]
    b = result["settings"]["batch_sizes"]
    columns = [("model", "model"), ("runtime", "runtime"), ("precision", "precision"), ("int8_from", "int8 from"),
               ("accuracy_pct", "accuracy %"), ("accuracy_drop_points", "drop (points)"), ("size_kb", "size KB"),
               ("size_vs_float32", "size ratio")]
    for batch in b:
        columns += [(f"latency_b{batch}_ms", f"b{batch} ms"), (f"speedup_b{batch}", f"b{batch} speed-up")]
    columns += [("status", "status")]
    lines.append(markdown_table(rows, columns))
    lines += ["", "## Target: int8 >= 1.5x float32 at batch 32, <= 0.5 points lost", ""]
    lines.append(markdown_table(result["targets"], [("model", "model"), ("runtime", "runtime"),
                                                    ("speedup_b32", "speed-up b32"),
                                                    ("accuracy_drop_points", "drop (points)"), ("met", "met")]))
    lines += ["", _study_markdown(result).split("\n", 2)[2]]
    return "\n".join(lines) + "\n"
