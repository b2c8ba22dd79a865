"""Wall time to a test accuracy: zoo's default recipe against the keras.io simple MNIST convnet.

The baseline is https://keras.io/examples/vision/mnist_convnet/ (Conv32-Pool-
Conv64-Pool-Flatten-Dropout(0.5)-Dense, Adam at 1e-3, batch 128). Both runs
use the same zoo.data MNIST pipeline and the same XLA setting, train epoch by
epoch, and are evaluated on all 10,000 test images after every epoch; the
clock stops during evaluation, so only training time counts. The recipe runs
its full schedule (its cosine decay is planned for its epochs); the baseline
stops at the target or its epoch budget. Target: 99.0% in at most 15 s on
2 cores, for every seed run.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import keras

import zoo.data
from zoo.benchmarks.common import machine, markdown_table
from zoo.training.config import DEFAULT_RECIPE, TrainConfig, load_recipe
from zoo.training.builders import build_and_compile, load_splits, resolve_jit_compile

TARGET_SECONDS = 15.0


@dataclasses.dataclass
class Curve:
    name: str
    seed: int = 0
    epochs: list = dataclasses.field(default_factory=list)  # (epoch, train seconds so far, test accuracy)
    # CPU seconds of the process while training (all threads): the work, whatever else shares the cores.
    cpu_s: list = dataclasses.field(default_factory=list)
    time_to_target_s: float | None = None
    epochs_to_target: int | None = None


def keras_io_convnet() -> keras.Model:
    """The keras.io "simple MNIST convnet", layer for layer."""
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            layers.Conv2D(32, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax"),
        ],
        name="keras_io_convnet",
    )


class _TestEval(keras.callbacks.Callback):
    """Evaluates on the test set after each epoch, with the training clock paused."""

    def __init__(self, curve: Curve, test_ds, target: float, stop_at_target: bool):
        super().__init__()
        self.curve, self.test_ds, self.target, self.stop_at_target = curve, test_ds, target, stop_at_target
        self.train_s = self.cpu_s = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._t, self._cpu = time.perf_counter(), time.process_time()

    def on_epoch_end(self, epoch, logs=None):
        self.train_s += time.perf_counter() - self._t
        self.cpu_s += time.process_time() - self._cpu
        self.curve.cpu_s.append(round(self.cpu_s, 2))
        acc = float(self.model.evaluate(self.test_ds, verbose=0, return_dict=True)["accuracy"])
        self.curve.epochs.append((epoch + 1, round(self.train_s, 2), acc))
        print(f"  {self.curve.name} (seed {self.curve.seed}): epoch {epoch + 1}  {self.train_s:6.1f} s "
              f"({self.cpu_s:.1f} CPU-s)  test accuracy {acc:.4f}", flush=True)
        if self.curve.time_to_target_s is None and acc >= self.target:
            self.curve.time_to_target_s, self.curve.epochs_to_target = round(self.train_s, 2), epoch + 1
            if self.stop_at_target:
                self.model.stop_training = True


def add_arguments(parser) -> None:
    parser.add_argument("--recipe", default=DEFAULT_RECIPE, help="zoo recipe to time (default: %(default)s)")
    parser.add_argument("--target", type=float, default=0.99, help="test accuracy to reach (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="seeds of the zoo recipe runs (default: 0 1 2); the baseline runs with the first")
    parser.add_argument("--baseline-epochs", type=int, default=10,
                        help="epoch budget of the keras.io baseline (default: %(default)s)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the keras.io baseline (about a minute)")


def run(args) -> dict:
    return run_seeds(recipe=args.recipe, target=args.target, seeds=args.seeds,
                     baseline_epochs=0 if args.no_baseline else args.baseline_epochs)


def run_seeds(recipe: str = DEFAULT_RECIPE, target: float = 0.99, seeds=(0, 1, 2), baseline_epochs: int = 10) -> dict:
    """The recipe once per seed, then the keras.io baseline once (first seed); the comparison."""
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed. Received: seeds=[]")
    runs = [dataclasses.asdict(recipe_curve(recipe, target, seed)) for seed in seeds]
    if baseline_epochs:
        runs.append(dataclasses.asdict(baseline_curve(recipe, target, seeds[0], baseline_epochs)))
    ours = [r for r in runs if r["name"].startswith("zoo:")]
    times = [r["time_to_target_s"] for r in ours]
    reached = all(t is not None for t in times)
    worst = max(times) if reached else None
    base = next((r for r in runs if not r["name"].startswith("zoo:")), None)
    speedup = None
    if base and base["time_to_target_s"] and ours[0]["time_to_target_s"]:
        speedup = round(base["time_to_target_s"] / ours[0]["time_to_target_s"], 2)
    return {
        "benchmark": "time_to_accuracy",
        "recipe": recipe,
        "target_test_accuracy": target,
        "target_seconds": TARGET_SECONDS,
        "seeds": seeds,
        "machine": machine(),
        "runs": runs,
        "worst_time_to_target_s": worst,
        "passed": bool(reached and worst <= TARGET_SECONDS),
        "speedup_vs_baseline": speedup,
        "baseline_reached_target": base["time_to_target_s"] is not None if base else None,
        "baseline_epoch_budget": baseline_epochs or None,
    }


def recipe_curve(recipe: str, target: float, seed: int) -> Curve:
    """zoo's recipe, its full schedule, evaluated after every epoch."""
    config = load_recipe(recipe, seed=seed, export_dir=None)
    keras.utils.set_random_seed(seed)
    train_ds, _, test_ds = load_splits(config)
    info = zoo.data.dataset_info(config.dataset)
    model = build_and_compile(config, info.input_shape, info.output_units, int(train_ds.cardinality()))
    return _fit(Curve(f"zoo:{recipe}", seed), model, train_ds, test_ds, config.epochs, target, stop_at_target=False)


def baseline_curve(recipe: str, target: float, seed: int, epochs: int) -> Curve:
    """The keras.io simple convnet with its own recipe, stopped at the target."""
    config = load_recipe(recipe, seed=seed, export_dir=None)
    keras.utils.set_random_seed(seed)
    base_config = TrainConfig(dataset="mnist", batch_size=128, seed=seed)
    train_ds, _, test_ds = load_splits(base_config)
    model = keras_io_convnet()
    model.compile(
        keras.optimizers.Adam(1e-3),
        "sparse_categorical_crossentropy",
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=resolve_jit_compile(config.jit_compile),
    )
    return _fit(Curve("keras.io simple convnet", seed), model, train_ds, test_ds, epochs, target, stop_at_target=True)


def _fit(curve, model, train_ds, test_ds, epochs, target, stop_at_target) -> Curve:
    model.fit(train_ds, epochs=epochs, verbose=0, shuffle=False,
              callbacks=[_TestEval(curve, test_ds, target, stop_at_target)])
    return curve


def markdown(result: dict) -> str:
    rows = []
    for r in result["runs"]:
        final = r["epochs"][-1] if r["epochs"] else (None, None, None)
        cpu = r.get("cpu_s") or []
        at = r["epochs_to_target"]
        rows.append({"run": r["name"], "seed": r["seed"], "time": r["time_to_target_s"],
                     "cpu": cpu[at - 1] if at and len(cpu) >= at else None,
                     "epochs": r["epochs_to_target"], "final": f"{final[2]:.2%} after {final[0]} epochs, {final[1]} s"
                     if final[0] else None})
    target = result["target_test_accuracy"]
    lines = [
        f"# Time to {target:.1%} MNIST test accuracy\n\n",
        f"{result['machine']['cpus']} CPUs, TensorFlow {result['machine']['tensorflow']}. Training time only "
        f"(the clock stops for the test evaluation after each epoch). Baseline: the keras.io simple convnet "
        f"(https://keras.io/examples/vision/mnist_convnet/), same pipeline.\n\n",
        markdown_table(rows, [("run", "run"), ("seed", "seed"), ("time", f"seconds to {target:.1%}"),
                              ("cpu", "CPU-seconds to it"), ("epochs", "epochs"), ("final", "final test accuracy")]),
        "\nCPU-seconds (all threads of the process) measure the work whatever else runs on the machine.\n",
        f"\nTarget: at most {result['target_seconds']:.0f} s for every seed. Worst seed: "
        f"{result['worst_time_to_target_s']} s: {'met' if result['passed'] else 'missed'}.",
    ]
    if result.get("speedup_vs_baseline"):
        lines.append(f" {result['speedup_vs_baseline']}x faster than the keras.io recipe (seed {result['seeds'][0]}).")
    elif result.get("baseline_reached_target") is False:
        lines.append(f" The keras.io recipe did not reach it in {result['baseline_epoch_budget']} epochs.")
    return "".join(lines) + "\n"


def plots(result: dict, folder, stem: str = "time_to_accuracy") -> list[Path]:
    """Test accuracy against training seconds, one line per run."""
    from zoo.benchmarks.common import pyplot, save_figure

    plt = pyplot()

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for r in result["runs"]:
        if r["epochs"]:
            _, seconds, acc = zip(*r["epochs"])
            ax.plot([0, *seconds], [None, *[100 * a for a in acc]], marker="o", label=f"{r['name']} (seed {r['seed']})")
    ax.axhline(100 * result["target_test_accuracy"], color="grey", linestyle="--", linewidth=1, label="target")
    ax.axvline(result["target_seconds"], color="grey", linestyle=":", linewidth=1, label="time budget")
    ax.set_xlabel("training seconds (evaluation excluded)")
    ax.set_ylabel("MNIST test accuracy (%)")
    ax.set_ylim(97.0, 99.6)
    ax.set_title(f"Time to {result['target_test_accuracy']:.1%} on {result['machine']['cpus']} CPUs")
    ax.legend(fontsize=7, loc="lower right")
    path = folder / f"{stem}.png"
    save_figure(fig, path, dpi=120)
    return [path]

