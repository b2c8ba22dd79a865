"""The backends benchmark on a lent GPU (issue 26's targets), prepared here and run there in one short call.

The GPU machines have JAX and PyTorch (CUDA) but no TensorFlow, and nothing can be installed there but what a
call carries (64 MiB). So `prepare` packs a bundle: zoo's and this package's source, the Keras, namex and
optree wheels for CPython 3.12 (Keras's only packages the machine lacks), and MNIST as its arrays file
(`zoo.data.mnist_local`, compressed). `run.sh` in the bundle unpacks the wheels beside the source and runs
`python -m benchmarks.backends_gpu run`, which measures, each in a process of its own:

- zoo's `mnist_speedrun` recipe to 99.0% MNIST test accuracy on Keras-JAX (mixed_bfloat16, jit), and on
  Keras-PyTorch, against the keras.io simple convnet on Keras-JAX (https://keras.io/examples/vision/
  mnist_convnet/), compilation counted (target: zoo at least 3x faster);
- zoo's `resnet50` training images/s on JAX, bf16, batch 256, synthetic 224x224, against torchvision's
  ResNet-50 under `torch.compile` (bf16 autocast) (target: at least 1.0x).

    python -m benchmarks.backends_gpu prepare /tmp/bundle      # here, with TensorFlow-prepared MNIST
    (device) bash run.sh                                       # writes $OUT/backends_gpu.json
    python -m benchmarks.backends_gpu run --tiny               # the same on CPU, tiny: proves the script works
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ("keras==3.15.1", "namex==0.1.0", "optree==0.20.0")
TARGET = 0.99

RUN_SH = """#!/usr/bin/env bash
# Runs the GPU backends benchmark from this bundle (benchmarks/backends_gpu.py); results to $OUT.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p site
for w in wheels/*.whl; do python -m zipfile -e "$w" site; done
export PYTHONPATH="$PWD/site:$PWD/src" ZOO_DATA_DIR="$PWD/data" TF_CPP_MIN_LOG_LEVEL=2
python -m benchmarks.backends_gpu run --out "${OUT:-.}/backends_gpu.json" "$@"
"""


def prepare(bundle: Path, data_dir: str | None = None) -> Path:
    """The bundle a device call carries: source, wheels, MNIST, run.sh."""
    import numpy as np

    from zoo.data import default_data_dir, mnist_local

    bundle = Path(bundle)
    for package in ("zoo", "benchmarks"):
        shutil.copytree(ROOT / package, bundle / "src" / package, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("node_modules", "results", "__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
                    *(f"--platform=manylinux_2_{v}_x86_64" for v in (17, 27, 28)), "--platform=manylinux2014_x86_64",
                    "--dest", str(bundle / "wheels"), *WHEELS], check=True)
    arrays = mnist_local.read_arrays(data_dir or default_data_dir())
    target = Path(mnist_local.arrays_path(str(bundle / "data")))
    target.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(target, **{f"{split}_{part}": a for split, rows in arrays.items()
                                   for part, a in zip(("images", "labels"), rows.data)})
    (bundle / "run.sh").write_text(RUN_SH)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    print(f"bundle {bundle}: {size / 2**20:.1f} MiB")
    return bundle


# -- the measurements, each in its own process ---------------------------------------------------------------


def zoo_recipe(backend: str, tiny: bool) -> dict:
    from zoo.training import load_recipe, train

    gpu = not tiny
    with tempfile.TemporaryDirectory() as out:
        config = load_recipe("mnist_speedrun", export_dir=None, verbose=0, out=out, backup_every=None,
                             mixed_precision="mixed_bfloat16" if gpu and backend == "jax" else None,
                             jit_compile=True if backend == "jax" else "auto")
        if tiny:
            config = config.replace(train_split="train[:512]", val_split="test[:256]", test_split="test[:256]")
        start = time.perf_counter()
        result = train(config)
    return {"what": f"zoo mnist_speedrun on Keras-{backend}", "test_accuracy": result.test_metrics["accuracy"],
            "time_to_target_s": result.time_to_target_s, "train_s": result.train_time_s,
            "wall_s": time.perf_counter() - start}


def keras_io_convnet(tiny: bool) -> dict:
    import keras

    import zoo.data

    keras.utils.set_random_seed(0)
    layers = keras.layers
    model = keras.Sequential([keras.Input((28, 28, 1)), layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(2),
                              layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(2), layers.Flatten(),
                              layers.Dropout(0.5), layers.Dense(10, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    train = zoo.data.load("mnist", "train[:512]" if tiny else "train", batch_size=128, seed=0)
    test = zoo.data.load("mnist", "test[:256]" if tiny else "test", batch_size=1000)
    start, reached, accuracy = time.perf_counter(), None, 0.0
    for epoch in range(1 if tiny else 15):
        model.fit(train, epochs=1, verbose=0)
        accuracy = float(model.evaluate(test, verbose=0, return_dict=True)["accuracy"])
        if accuracy >= TARGET:
            reached = time.perf_counter() - start
            break
    return {"what": "keras.io convnet on Keras-jax", "test_accuracy": accuracy, "time_to_target_s": reached,
            "epochs": epoch + 1, "wall_s": time.perf_counter() - start}


def zoo_resnet50(tiny: bool) -> dict:
    import keras
    import numpy as np

    import zoo

    keras.config.set_dtype_policy("float32" if tiny else "mixed_bfloat16")
    size, batch, steps = (64, 2, 3) if tiny else (224, 256, 30)
    model = zoo.build("resnet50", input_shape=(size, size, 3), num_classes=1000)
    model.compile(keras.optimizers.SGD(0.1, momentum=0.9), "sparse_categorical_crossentropy", jit_compile=True)
    x = np.random.default_rng(0).standard_normal((batch, size, size, 3)).astype("float32")
    y = np.zeros((batch,), "int32")
    model.train_on_batch(x, y)  # compile
    model.train_on_batch(x, y)
    start = time.perf_counter()
    for _ in range(steps):
        loss = model.train_on_batch(x, y)
    float(np.asarray(loss if not isinstance(loss, list) else loss[0]))
    return {"what": "zoo resnet50 on Keras-jax", "images_per_s": steps * batch / (time.perf_counter() - start),
            "batch_size": batch, "image_size": size, "precision": "float32" if tiny else "bfloat16"}


def torchvision_resnet50(tiny: bool) -> dict:
    try:
        import torch
        import torchvision
    except ImportError as e:
        return {"what": "torchvision resnet50, torch.compile", "skipped": f"not installed here ({e})"}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    size, batch, steps = (64, 2, 3) if tiny else (224, 256, 30)
    model = torchvision.models.resnet50().to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step_model = torch.compile(model)
    x = torch.randn(batch, 3, size, size, device=device).to(memory_format=torch.channels_last)
    y = torch.zeros(batch, dtype=torch.long, device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=not tiny):
            loss = torch.nn.functional.cross_entropy(step_model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(3):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    float(loss)
    return {"what": "torchvision resnet50, torch.compile", "images_per_s": steps * batch / (time.perf_counter() - start),
            "batch_size": batch, "image_size": size, "device": device}


MEASUREMENTS = {
    "zoo_jax": ("jax", lambda tiny: zoo_recipe("jax", tiny)),
    "zoo_torch": ("torch", lambda tiny: zoo_recipe("torch", tiny)),
    "keras_io_jax": ("jax", keras_io_convnet),
    "resnet50_jax": ("jax", zoo_resnet50),
    "resnet50_torchvision": ("torch", torchvision_resnet50),
}


def run(out: Path, tiny: bool) -> dict:
    results = {}
    for name, (backend, _) in MEASUREMENTS.items():
        env = dict(os.environ, KERAS_BACKEND=backend)
        code = (f"import json, sys; from benchmarks import backends_gpu as b; "
                f"print(json.dumps(b.MEASUREMENTS[{name!r}][1]({tiny})))")
        print(f"{name} ...", flush=True)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        results[name] = (json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0
                         else {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]})
        print(f"  {results[name]}", flush=True)
    speedrun, convnet = results["zoo_jax"], results["keras_io_jax"]
    if speedrun.get("time_to_target_s") and convnet.get("time_to_target_s"):
        results["speedup_to_99_vs_keras_io"] = convnet["time_to_target_s"] / speedrun["time_to_target_s"]
    jax_r50, torch_r50 = results["resnet50_jax"], results["resnet50_torchvision"]
    if jax_r50.get("images_per_s") and torch_r50.get("images_per_s"):
        results["resnet50_jax_vs_torch_compile"] = jax_r50["images_per_s"] / torch_r50["images_per_s"]
    results["tiny"] = tiny
    Path(out).write_text(json.dumps(results, indent=2, default=str) + "\n")
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.backends_gpu", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="pack the bundle a device call carries")
    p.add_argument("bundle")
    p.add_argument("--data-dir", default=None)
    p = sub.add_parser("run", help="measure (on the device; --tiny on CPU)")
    p.add_argument("--out", default="backends_gpu.json")
    p.add_argument("--tiny", action="store_true", help="a tiny configuration that runs on CPU in minutes")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(Path(args.bundle), args.data_dir)
    else:
        run(Path(args.out), args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
