"""Does the first epoch wait on data? Each input source against the model it feeds, from the first epoch.

For three sources:

- MNIST from TFDS (`zoo.data.load`), the decoded split from `zoo.data.decoded_cache`;
- an image folder of PNG files (`zoo.data.from_image_folder`), 32x32 RGB;
- a CSV table (`zoo.data.from_table`), 30 numeric features;

the training pipeline alone is timed for its first and second epoch of a
freshly built dataset, counted inside tf.data (`Dataset.reduce`: no Python
per batch), against the training samples/s of a zoo model that consumes
that source (its `fit` on in-memory batches of the same shape, measured in
the same process). The headroom is the first epoch's rate over the model's;
the target is `TARGET_HEADROOM`. The one-time cost of decoding a split into
the cache (done by `zoo data prepare`, or the first read of a new folder) is
reported beside, as "cold".
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

TARGET_HEADROOM = 3.0


@dataclasses.dataclass(frozen=True)
class Source:
    """A source, the batch size it is read at, and the model (registry name, overrides) that consumes it."""

    label: str
    batch_size: int
    model: str
    input_shape: tuple
    num_classes: int
    overrides: dict = dataclasses.field(default_factory=dict)


SOURCES = {
    "mnist": Source("MNIST (TFDS, decoded cache)", 128, "convnet_bn", (28, 28, 1), 10,
                    {"filters": [16, 32, 64], "padding": "valid", "dropout": 0.0}),
    "image_folder": Source("image folder (3,000 PNG files, 32x32 RGB)", 128, "convnet_bn", (32, 32, 3), 10),
    "table": Source("CSV table (50,000 rows x 30 features)", 32, "tabular_resnet", (30,), 2,
                    {"depth": 1, "width": 16}),
}


def epoch_rate(ds) -> float:
    """Samples/s of one full pass over a batched `(x, y)` dataset, counted inside tf.data."""
    start = time.perf_counter()
    n = int(ds.reduce(np.int64(0), lambda total, batch: total + tf.cast(tf.shape(batch[0])[0], tf.int64)))
    return n / (time.perf_counter() - start)


def model_rate(source: Source, steps: int = 40, seed: int = 0) -> float:
    """Training samples/s of the zoo model that consumes `source`, on in-memory batches of its shape."""
    import keras

    from benchmarks.fit_timing import timed_fit
    from zoo.training.builders import build_and_compile
    from zoo.training.config import TrainConfig

    keras.utils.set_random_seed(seed)
    config = TrainConfig(model=source.model, batch_size=source.batch_size, schedule="constant", export_dir=None,
                         jit_compile=False, model_overrides=dict(source.overrides))
    model = build_and_compile(config, source.input_shape, source.num_classes, steps_per_epoch=None)
    rng = np.random.default_rng(seed)
    n = 8 * source.batch_size
    x = rng.random((n, *source.input_shape), dtype=np.float32)
    y = rng.integers(0, source.num_classes, n).astype(np.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(source.batch_size).cache().repeat().prefetch(2)
    timed_fit(model, ds, 3, 2)  # tracing
    steps_per_s, _, _ = timed_fit(model, ds, steps, 3)
    return steps_per_s * source.batch_size


def _image_folder(root: Path, count: int = 3000, seed: int = 0) -> Path:
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(count):
        folder = root / f"class{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    return root


def _table(path: Path, rows: int = 50_000, seed: int = 0) -> Path:
    import pandas as pd

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(rows, 30)), columns=[f"f{i}" for i in range(30)])
    frame["label"] = rng.integers(0, 2, rows)
    frame.to_csv(path, index=False)
    return path


def measure(name: str, work_dir: Path, seed: int = 0) -> dict:
    """One source's row: cold cost, first and second epoch samples/s, the consumer's, the headroom."""
    import zoo.data
    from zoo.data import memory, tfds_source

    source = SOURCES[name]
    row = {"source": name, "label": source.label, "batch_size": source.batch_size, "model": source.model}
    start = time.perf_counter()
    if name == "mnist":
        data_dir = zoo.data.default_data_dir()
        builder = tfds_source.get_builder("mnist", data_dir)
        cold = time.perf_counter()
        decoded = memory.materialize(tfds_source.read_split(builder, "train"))  # what the cache paid once
        row["cold_samples_per_s"] = round(len(decoded) / (time.perf_counter() - cold), 1)
        zoo.data.prepare("mnist", data_dir)  # the decoded split in place, as after `zoo data prepare`
        start = time.perf_counter()
        ds = zoo.data.load("mnist", "train", source.batch_size, data_dir=data_dir, seed=seed)
    elif name == "image_folder":
        root = _image_folder(work_dir / "images")
        os.environ["ZOO_CACHE_DIR"] = str(work_dir / "cache")  # not the user's ~/.cache/zoo
        cold = time.perf_counter()
        zoo.data.from_image_folder(root, image_size=(32, 32), batch_size=source.batch_size, seed=seed)
        row["cold_samples_per_s"] = round(3000 / (time.perf_counter() - cold), 1)  # verify + decode + write
        start = time.perf_counter()
        ds = zoo.data.from_image_folder(root, image_size=(32, 32), batch_size=source.batch_size, seed=seed).train
    else:
        path = _table(work_dir / "table.csv")
        start = time.perf_counter()
        ds = zoo.data.from_table(path, target="label", batch_size=source.batch_size, seed=seed).train
    row["open_s"] = round(time.perf_counter() - start, 2)  # building the pipeline: reading the cache or CSV
    row["first_epoch_samples_per_s"] = round(epoch_rate(ds), 1)
    row["samples_per_s"] = round(epoch_rate(ds), 1)
    row["model_samples_per_s"] = round(model_rate(source, seed=seed), 1)
    row["headroom"] = round(row["first_epoch_samples_per_s"] / row["model_samples_per_s"], 2)
    row["target"] = TARGET_HEADROOM
    row["passed"] = row["headroom"] >= TARGET_HEADROOM
    return row


def run_all(names=tuple(SOURCES), seed: int = 0) -> list[dict]:
    saved = os.environ.get("ZOO_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="zoo-pipeline-bench-") as tmp:
        try:
            rows = []
            for name in names:
                print(f"[training] input pipeline: {SOURCES[name].label}", flush=True)
                rows.append(measure(name, Path(tmp), seed=seed))
                r = rows[-1]
                print(f"  first epoch {r['first_epoch_samples_per_s']:,.0f} samples/s, later "
                      f"{r['samples_per_s']:,.0f}, model {r['model_samples_per_s']:,.0f}: headroom "
                      f"{r['headroom']:.1f}x", flush=True)
            return rows
        finally:
            if saved is None:
                os.environ.pop("ZOO_CACHE_DIR", None)
            else:
                os.environ["ZOO_CACHE_DIR"] = saved


def markdown(rows: list[dict]) -> str:
    from benchmarks.common import markdown_table

    return markdown_table(rows, [
        ("label", "source"), ("batch_size", "batch"), ("cold_samples_per_s", "cold (decode once) samples/s"),
        ("open_s", "open s"), ("first_epoch_samples_per_s", "first epoch samples/s"),
        ("samples_per_s", "second epoch samples/s"), ("model", "model"),
        ("model_samples_per_s", "model samples/s"), ("headroom", "first-epoch headroom"),
        ("passed", f">= {TARGET_HEADROOM:g}x")])
