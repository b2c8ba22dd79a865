"""SavedModel in TF Serving's layout, verified by loading it back with TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.core.options import PATH, POSITIVE_INT, Option
from zoo.formats.base import DEFAULT_THREADS, Converted, Format, Job, Runner, predict_in_chunks
from zoo.formats.signature import SERVING_SIGNATURE

FORMAT = Format(
    name="saved_model",
    artifact="saved_model",
    runtime=f"TensorFlow (tf.saved_model.load, {SERVING_SIGNATURE})",
    description=f"TF Serving layout <serving_dir>/<name>/<version>, named `{SERVING_SIGNATURE}` signature",
    options=(
        Option("serving_dir", "TF Serving base directory (default <out>/saved_model)", check=PATH,
               flag="--export-dir"),
        Option("version", "explicit version number (default: the next free one)", check=POSITIVE_INT),
        Option("keep", "keep only the newest N versions", check=POSITIVE_INT),
    ),
)


def publish_saved_model(model, base_dir="saved_models", name=None, *, version=None, keep=None, warmup_data=None,
                        warmup_records=10):
    """Exports `model` to the next version under `<base_dir>/<name>/`, atomically.

    With `warmup_data` (real inputs: an array or a tf.data of `(x, y)` batches) the version also
    gets TF Serving warmup records built from its first `warmup_records` examples
    (`zoo.formats.saved_model_warmup`), written before the version directory appears.

    Returns the version directory, e.g. `saved_models/convnet_bn/3`.
    """
    from zoo.formats.saved_model_versions import publish
    from zoo.formats.saved_model_warmup import model_samples, predict_requests, write_warmup
    from zoo.formats.signature import export_saved_model

    name = name or model.name
    requests = None
    if warmup_data is not None:
        requests = predict_requests(model_samples(model, warmup_data, warmup_records), name,
                                    num_records=warmup_records)

    def write(path):
        export_saved_model(model, path)
        if requests:
            write_warmup(path, requests)

    return publish(write, Path(base_dir) / name, version=version, keep=keep)


def convert(job: Job) -> Converted:
    """Publishes the export's SavedModel as the next version under `<serving_dir or target.path>/<model
    name>/` atomically, with TF Serving warmup records from the evaluation data when real data was given."""
    import shutil

    from zoo.formats.inputs import count
    from zoo.formats.saved_model_versions import publish
    from zoo.formats.saved_model_warmup import predict_requests, write_warmup

    opts = job.target.options
    base = Path(opts.get("serving_dir") or job.target.path)
    warmup = job.inputs("warmup_x")
    requests = predict_requests(warmup, job.model_name, num_records=count(warmup)) if warmup else None
    source = job.saved_model()

    def write(path):
        shutil.copytree(source, path)
        if requests:
            write_warmup(path, requests)

    path = publish(write, base / job.model_name, version=opts.get("version"), keep=opts.get("keep"))
    return Converted(str(path), notes=[f"TF Serving model base path: {path.parent}"])


class SavedModelRunner(Runner):
    runtime = f"TensorFlow SavedModel ({SERVING_SIGNATURE})"

    def __init__(self, path):
        import tensorflow as tf

        self._tf = tf
        self._sig = tf.saved_model.load(str(path)).signatures[SERVING_SIGNATURE]
        self.input_names = list(self._sig.structured_input_signature[1])

    def predict(self, x) -> dict[str, np.ndarray]:
        return predict_in_chunks(
            lambda b: {k: v.numpy() for k, v in self._sig(**{n: self._tf.constant(v) for n, v in b.items()}).items()},
            self.named(x), 1000)


def unsupported_ops(traced) -> list:
    """None: a SavedModel holds every TensorFlow op the model was traced with."""
    return []


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> SavedModelRunner:
    """The SavedModel's `serving_default` in TensorFlow. `threads` is not applied: TensorFlow's thread
    pools are per process, set once before the first op runs."""
    return SavedModelRunner(path)
