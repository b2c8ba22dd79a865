"""Transfer learning measured: pretrain on MNIST digits 0-4, fine-tune on 5-9 with few labels, against scratch.

Issue 15's experiment. `convnet_bn` is pretrained once on `mnist_0to4` and
saved as a preset; then, per seed and per training-set size (50 and 100
images per digit, `mnist_5to9_50` / `mnist_5to9_100`), the same model is
trained on the 5-9 task from scratch and from the preset in four ways (all
layers; head only; head, then all at a tenth of the rate; layer-wise rate
decay), every run with the same recipe and the same number of epochs, and
scored on all 4,861 test images of 5-9. No validation split is used for
anything (no early stopping, no model selection), so the test accuracy is
an honest estimate. The two tasks share no class: what transfers is the
features. A fine-tuning setup beats scratch convincingly when its margin over
scratch exceeds the spread (max - min) of both over seeds.

    python scripts/benchmark.py transfer --results results/transfer
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time

from benchmarks.common import machine

PRESET = "convnet_bn_mnist0to4"
PRETRAIN = dict(model="convnet_bn", dataset="mnist_0to4", epochs=2, batch_size=256, optimizer="adamw", lr=1e-2,
                weight_decay=1e-4, schedule="cosine", warmup_fraction=0.1, val_split=None, test_split="test")
FINETUNE = dict(model="convnet_bn", batch_size=32, optimizer="adamw", lr=3e-3, weight_decay=1e-4, schedule="cosine",
                warmup_fraction=0.1, val_split=None, test_split="test")
THIRD = "a third of the epochs"  # unfreeze_at, resolved per run
# setup -> TrainConfig changes on top of FINETUNE.
SETUPS = {
    "scratch": {},
    "fine-tune all layers": {"weights": PRESET, "new_head": True},
    "head only (frozen backbone)": {"weights": PRESET, "new_head": True, "freeze": "backbone"},
    "head, then all (unfreeze at 1/3, lr x0.1)": {"weights": PRESET, "new_head": True, "freeze": "backbone",
                                                   "unfreeze_at": THIRD},
    "layer-wise lr decay 0.1": {"weights": PRESET, "new_head": True, "layer_lr_decay": 0.1},
}


def add_arguments(parser) -> None:
    parser.add_argument("--seeds", default="0,1,2", help="fine-tuning seeds (default 0,1,2)")
    parser.add_argument("--sizes", default="50,100", help="training images per digit: 50 and/or 100")
    parser.add_argument("--epochs", type=int, default=30, help="epochs of every 5-9 run (default 30)")
    parser.add_argument("--data-dir", default=None, help="prepared MNIST (default $ZOO_DATA_DIR, ~/tensorflow_datasets)")
    parser.add_argument("--quick", action="store_true", help="one seed, 50 per digit, 3 epochs: a smoke test")


def _train(**values) -> tuple[float, float]:
    from zoo.training import TrainConfig, train

    config = TrainConfig(export_dir=None, out=tempfile.mkdtemp(prefix="zoo-transfer-"), verbose=0, **values)
    result = train(config)
    return result.test_metrics["accuracy"], result.train_time_s


def run(args) -> dict:
    seeds = [0] if args.quick else [int(s) for s in args.seeds.split(",")]
    sizes = [50] if args.quick else [int(s) for s in args.sizes.split(",")]
    epochs = 3 if args.quick else args.epochs
    os.environ["ZOO_HOME"] = tempfile.mkdtemp(prefix="zoo-transfer-home-")  # the preset stays out of the user's store
    pretrain_accuracy, pretrain_s = _train(**PRETRAIN, seed=0, data_dir=args.data_dir, save_preset=PRESET)
    print(f"pretrained on mnist_0to4: test accuracy {pretrain_accuracy:.4f} ({pretrain_s:.0f} s)", flush=True)
    rows = []
    for size in sizes:
        for setup, changes in SETUPS.items():
            changes = {k: (max(1, epochs // 3) if v == THIRD else v) for k, v in changes.items()}
            for seed in seeds:
                start = time.perf_counter()
                accuracy, train_s = _train(**FINETUNE, **changes, dataset=f"mnist_5to9_{size}", epochs=epochs,
                                           seed=seed, data_dir=args.data_dir)
                rows.append({"per_class": size, "images": 5 * size, "setup": setup, "seed": seed,
                             "test_accuracy": accuracy, "train_time_s": round(train_s, 1),
                             "wall_s": round(time.perf_counter() - start, 1)})
                print(f"{size}/digit  {setup:<44} seed {seed}: {accuracy:.4f}", flush=True)
    return {
        "benchmark": "transfer",
        "machine": machine(),
        "pretrain": {**PRETRAIN, "seed": 0, "test_accuracy": pretrain_accuracy, "train_time_s": round(pretrain_s, 1)},
        "finetune": {**FINETUNE, "epochs": epochs, "seeds": seeds, "test_images": 4861},
        "setups": SETUPS,
        "rows": rows,
        "summary": summarize(rows),
    }


@dataclasses.dataclass
class Summary:
    per_class: int
    setup: str
    mean: float
    low: float
    high: float
    n: int

    @property
    def spread(self) -> float:
        return self.high - self.low


def summarize(rows: list[dict]) -> list[dict]:
    """Per (size, setup): mean, min, max over seeds; per fine-tuning setup: its margin over scratch
    and whether it exceeds the spread of both (the issue's criterion)."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault((r["per_class"], r["setup"]), []).append(r["test_accuracy"])
    stats = {k: Summary(k[0], k[1], statistics.fmean(v), min(v), max(v), len(v)) for k, v in groups.items()}
    out = []
    for (size, setup), s in stats.items():
        scratch = stats.get((size, "scratch"))
        row = {**dataclasses.asdict(s), "spread": s.spread}
        if scratch is not None and setup != "scratch":
            row["margin_over_scratch"] = s.mean - scratch.mean
            row["beats_scratch_beyond_spread"] = s.low - scratch.high > 0 and (
                s.mean - scratch.mean > max(s.spread, scratch.spread))
        out.append(row)
    return out


def markdown(result: dict) -> str:
    p, f = result["pretrain"], result["finetune"]
    lines = [
        f"Pretraining: {p['model']} on {p['dataset']}, {p['epochs']} epochs: test accuracy {p['test_accuracy']:.4f}. "
        f"Transfer runs: {f['epochs']} epochs each, batch {f['batch_size']}, {f['optimizer']} lr {f['lr']:g} "
        f"(cosine), seeds {', '.join(map(str, f['seeds']))}; test accuracy on all {f['test_images']} test images "
        "of digits 5-9. Spread = max - min over seeds.",
        "",
        "| images (per digit) | setup | mean test accuracy | min | max | spread | margin over scratch | "
        "beats scratch beyond the spread |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in result["summary"]:
        margin = f"{s['margin_over_scratch']:+.4f}" if "margin_over_scratch" in s else "-"
        beats = {True: "yes", False: "no"}.get(s.get("beats_scratch_beyond_spread"), "-")
        lines.append(f"| {5 * s['per_class']} ({s['per_class']}) | {s['setup']} | {s['mean']:.4f} | {s['low']:.4f} | "
                     f"{s['high']:.4f} | {s['spread']:.4f} | {margin} | {beats} |")
    m = result["machine"]
    lines += ["", f"Machine: {m.get('cpu_model')}, {m.get('cpus')} CPUs; wall time {result.get('wall_s', '?')} s."]
    return "\n".join(lines) + "\n"
