"""Where post-training int8 hurts: float vs PTQ int8 accuracy of candidate models, per runtime.

Issue 16 asks for QAT "on a model where PTQ int8 loses at least 1 point". This suite searches for
one among the zoo's models on the offline data (MNIST), with the configurations the literature
names as hard for post-training quantization:

- no BatchNorm, unbounded activations (Nagel et al. 2019, "Data-Free Quantization Through Weight
  Equalization and Bias Correction", https://arxiv.org/abs/1906.04721: per-tensor activation ranges
  set by the widest channel);
- Dense layers, whose TFLite weights are per tensor (the int8 spec's FULLY_CONNECTED), with BatchNorm
  folded into them (DFQ, Section 3);
- very small widths, depthwise-heavy MobileNetV2 (Krishnamoorthi 2018, https://arxiv.org/abs/1806.08342,
  Table 2) and MobileNetV3's hard-swish and squeeze-excite (the reason EfficientNet-Lite dropped them);
- LayerNorm + GELU (MLP-Mixer; post-LayerNorm inter-channel variation, Lin et al. 2022, RepQ-ViT /
  FQ-ViT https://arxiv.org/abs/2111.13824).

Each candidate is trained with the default recipe and the changes listed in `CANDIDATES`, then exported
by `zoo.deploy.export.export` to float32 and post-training int8 (200 calibration examples from the training
split, per-channel conv weights, min/max activation ranges) and measured on the whole test split in
each runtime. The table says, per candidate, how many points int8 loses.

    python scripts/benchmark.py quantization-search             # every candidate, TFLite and ONNX
    python scripts/benchmark.py quantization-search --models lenet5,mlp_batchnorm --runtimes tflite
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.common import first_examples, machine, markdown_table
from benchmarks.quantization import CALIBRATION_SAMPLES, STUDY_DIR

RUNTIMES = ("tflite", "onnx")
HURT_POINTS = 1.0  # the bar: PTQ int8 loses at least this many points


@dataclasses.dataclass(frozen=True)
class Candidate:
    name: str
    changes: dict  # TrainConfig fields over the default recipe's
    why: str


_MNIST32 = {"dataset": "mnist32", "batch_size": 128}
CANDIDATES = {
    c.name: c
    for c in (
        Candidate("lenet5", {"model": "lenet5"}, "no BatchNorm, unbounded ReLU"),
        Candidate("lenet5_high_lr", {"model": "lenet5", "lr": 0.03, "weight_decay": 0.0},
                  "no BatchNorm, ReLU, 3x the recipe's lr and no weight decay"),
        Candidate("lenet5_tanh", {"model": "lenet5", "model_overrides": {"activation": "tanh"}}, "no BatchNorm, tanh"),
        Candidate("lenet5_long", {"model": "lenet5", "epochs": 10, "weight_decay": 0.0, "lr": 0.03},
                  "no BatchNorm, ReLU, 10 epochs at 3x the recipe's lr, no weight decay: weights free to grow"),
        Candidate("mlp", {"model": "mlp"}, "Dense only (per-tensor int8 weights), no normalization"),
        Candidate("mlp_w16", {"model": "mlp", "model_overrides": {"width": 16, "dropout": 0.0}},
                  "Dense only, 16 units"),
        Candidate("mlp_batchnorm", {"model": "mlp", "model_overrides": {"norm": "batch"}},
                  "BatchNorm folded into per-tensor Dense weights"),
        Candidate("mlp_layernorm_gelu", {"model": "mlp", "model_overrides": {"norm": "layer", "activation": "gelu",
                                                                              "width": 256, "depth": 3}},
                  "LayerNorm + GELU"),
        Candidate("convnet_bn_4_8_8", {"model_overrides": {"filters": [4, 8, 8]}}, "a quarter of the default width"),
        Candidate("convnet_bn_2_4_8", {"model_overrides": {"filters": [2, 4, 8]}}, "2-4-8 channels"),
        Candidate("convnet_bn_4_8_16_avg", {"model_overrides": {"filters": [4, 8, 16], "pooling": "avg"}},
                  "narrow, 16 pooled features"),
        Candidate("convnet_bn_3_6_6_avg", {"epochs": 4, "model_overrides": {"filters": [3, 6, 6], "pooling": "avg"}},
                  "narrowest, 6 pooled features"),
        Candidate("convnet_bn_high_lr", {"lr": 0.1, "weight_decay": 0.0}, "the default model at 10x the recipe's lr"),
        Candidate("tcn_plain", {"model": "tcn", "dataset": "mnist_sequence", "model_overrides": {"weight_norm": False}},
                  "8 causal convs and residual adds, no normalization"),
        Candidate("resnet20_w4", {"model": "resnet20", **_MNIST32, "epochs": 2, "model_overrides": {"base_filters": 4}},
                  "ResNet-20 at a quarter width (4-8-16 channels)"),
        Candidate("resnet20_w4_undertrained", {"model": "resnet20", **_MNIST32, "epochs": 1, "lr": 3e-3,
                                               "model_overrides": {"base_filters": 4}},
                  "the same, 1 epoch at lr 3e-3 (the resnet20 row's schedule): not converged"),
        Candidate("mobilenet_v2_x0.1", {"model": "mobilenet_v2", **_MNIST32, "epochs": 2,
                                        "model_overrides": {"alpha": 0.1, "bn_momentum": 0.99}},
                  "depthwise-heavy, 8-channel bottlenecks, the recipe's lr 1e-2"),
        Candidate("mobilenet_v2_x0.35_high_lr", {"model": "mobilenet_v2", **_MNIST32, "epochs": 2, "lr": 0.05,
                                                "weight_decay": 0.0,
                                                "model_overrides": {"alpha": 0.35, "bn_momentum": 0.99}},
                  "depthwise-heavy, 5x the recipe's lr, no weight decay"),
        Candidate("mobilenet_v3_small", {"model": "mobilenet_v3_small", **_MNIST32, "epochs": 2, "lr": 3e-3,
                                         "model_overrides": {"include_preprocessing": False, "bn_momentum": 0.99}},
                  "hard-swish and squeeze-excite"),
        Candidate("mixer_tiny", {"model": "mixer_s32", "epochs": 2, "batch_size": 128, "lr": 3e-3,
                                 "model_overrides": {"patch_size": 4, "hidden_dim": 64, "tokens_mlp_dim": 64,
                                                     "channels_mlp_dim": 128, "depth": 4}},
                  "MLP-Mixer: LayerNorm, GELU, residual stream"),
    )
}


def add_arguments(parser) -> None:
    parser.add_argument("--models", default=",".join(CANDIDATES), help=f"comma-separated, of {', '.join(CANDIDATES)}")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help=f"comma-separated, of {', '.join(RUNTIMES)}")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    parser.add_argument("--study-dir", default=str(STUDY_DIR),
                        help="where ptq_search.json/.md go (default results/quantization)")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 1 epoch on 7680 examples, 512 test")


def run(args) -> dict:
    from zoo.errors import UnknownNameError
    from zoo.deploy.export.isolation import ConversionProcess

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    runtimes = [n.strip() for n in args.runtimes.split(",") if n.strip()]
    for kind, values, allowed in (("model", names, CANDIDATES), ("runtime", runtimes, RUNTIMES)):
        for v in values:
            if v not in allowed:
                raise UnknownNameError(f"quantization search {kind}", v, allowed)
    work = Path(tempfile.mkdtemp(prefix="zoo-quant-search-"))
    process = ConversionProcess(log_path=work / "conversion.log")
    rows = []
    try:
        for name in names:
            print(f"[{name}] training", flush=True)
            rows.extend(_measure(CANDIDATES[name], args, runtimes, work, process))
            print("  " + "; ".join(f"{r['runtime']}: {r['float32']} -> {r['int8']}" for r in rows[-len(runtimes):]),
                  flush=True)
    finally:
        process.close()
        shutil.rmtree(work, ignore_errors=True)
    if not args.quick:
        rows = _merged(rows, Path(args.study_dir) / "ptq_search.json", args.seed)
    hurt = [r for r in rows if r.get("ptq_loss_points") is not None and r["ptq_loss_points"] >= HURT_POINTS]
    result = {
        "suite": "quantization-search",
        "machine": machine(),
        "settings": {"models": sorted({r["model"] for r in rows}, key=list(CANDIDATES).index), "runtimes": runtimes,
                     "seed": args.seed, "quick": args.quick, "calibration_samples": CALIBRATION_SAMPLES,
                     "hurt_points": HURT_POINTS},
        "rows": rows,
        "hurt": [f"{r['model']} ({r['runtime']})" for r in hurt],
    }
    if not args.quick:
        _write(result, Path(args.study_dir))
    return result


def _merged(rows: list[dict], previous: Path, seed: int) -> list[dict]:
    """This run's rows plus the earlier run's rows of the other candidates (same seed, same machine kind), in
    `CANDIDATES` order: `--models a,b` re-measures a and b and keeps the rest of the table."""
    try:
        old = json.loads(previous.read_text())
    except (OSError, ValueError):
        return rows
    if old.get("settings", {}).get("seed") != seed or old.get("machine", {}).get("cpu_model") != machine().get(
            "cpu_model"):
        return rows
    fresh = {(r["model"], r["runtime"]) for r in rows}
    kept = [r for r in old.get("rows", []) if r["model"] in CANDIDATES and (r["model"], r["runtime"]) not in fresh]
    order = list(CANDIDATES)
    return sorted(kept + rows, key=lambda r: (order.index(r["model"]), RUNTIMES.index(r["runtime"])))


def _measure(candidate: Candidate, args, runtimes, work: Path, process) -> list[dict]:
    import zoo.data
    from zoo.deploy.export import ExportData, export
    from zoo.training import load_recipe, train
    from zoo.training.config import DEFAULT_RECIPE

    config = load_recipe(DEFAULT_RECIPE, **candidate.changes).replace(
        out=str(work / "runs"), export_dir=None, val_split=None, backup_every=None, verbose=0, seed=args.seed)
    if args.quick:
        config = config.replace(epochs=1, train_split="train[:7680]")
    t0 = time.perf_counter()
    trained = train(config)
    train_s = round(time.perf_counter() - t0, 1)
    test_x, test_y = first_examples(zoo.data.load(config.dataset, "test", 1000), 512 if args.quick else 10000)
    rep_x, _ = first_examples(zoo.data.load(config.dataset, "train", 100, seed=1), CALIBRATION_SAMPLES)
    report = export(trained.run_dir / "last.keras", work / candidate.name, runtimes, precision=["float32", "int8"],
                    data=ExportData(calibration=rep_x, test=(test_x, test_y)), calibration_samples=len(rep_x),
                    latency_runs=0, process=process)
    by = {(r.format, r.variant): r for r in report.results}
    rows = []
    for runtime in runtimes:
        f, q = by.get((runtime, "float32")), by.get((runtime, "int8"))
        fa = f.verification.accuracy if f and f.verification else None
        qa = q.verification.accuracy if q and q.verification else None
        rows.append({
            "model": candidate.name, "why": candidate.why, "changes": candidate.changes, "runtime": runtime,
            "keras": report.keras.accuracy, "float32": fa, "int8": qa,
            "ptq_loss_points": None if fa is None or qa is None else round(100 * (fa - qa), 2),
            "argmax_agreement": q.verification.argmax_agreement if q and q.verification else None,
            "status": {"float32": f.status if f else None, "int8": q.status if q else None},
            "error": (q.error if q else None) or (f.error if f else None), "train_s": train_s,
            "test_examples": len(test_y),
        })
    return rows


def _write(result: dict, folder: Path) -> None:
    from zoo.fileio import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "ptq_search.json", json.dumps(result, indent=2, default=str) + "\n")
    atomic_write_text(folder / "ptq_search.md", markdown(result))


def _pct(v):
    return None if v is None else round(100 * v, 2)


def markdown(result: dict) -> str:
    m, s = result["machine"], result["settings"]
    lines = ["# Where post-training int8 hurts: the search", "",
             f"Written by `python scripts/benchmark.py quantization-search`. Machine: {m.get('cpu_model')}, {m.get('cpus')} CPUs; "
             f"TF {m.get('tensorflow')}, LiteRT {m.get('ai-edge-litert')}, onnxruntime {m.get('onnxruntime')}. "
             f"Each model trained once (seed {s['seed']}) with the default recipe and the listed changes; int8 is "
             f"post-training, calibrated on {s['calibration_samples']} training examples; accuracy (%) on the whole "
             "test split in each runtime. The bar: int8 loses >= "
             f"{s['hurt_points']:g} point.", ""]
    rows = [{**r, "float_pct": _pct(r["float32"]), "int8_pct": _pct(r["int8"]),
             "agree": None if r["argmax_agreement"] is None else round(100 * r["argmax_agreement"], 2),
             "changes_text": json.dumps(r["changes"], separators=(",", ":"))} for r in result["rows"]]
    lines.append(markdown_table(rows, [("model", "model"), ("why", "why a candidate"), ("runtime", "runtime"),
                                       ("float_pct", "float32 %"), ("int8_pct", "PTQ int8 %"),
                                       ("ptq_loss_points", "loss (points)"), ("agree", "argmax agreement %"),
                                       ("train_s", "train s")]))
    lines += ["", "Models that meet the bar: " + (", ".join(result["hurt"]) or "none"), "",
              "Changes over the default recipe (mnist_fast):", ""]
    seen = set()
    for r in rows:
        if r["model"] not in seen:
            seen.add(r["model"])
            lines.append(f"- `{r['model']}`: `{r['changes_text']}`")
    return "\n".join(lines) + "\n"
