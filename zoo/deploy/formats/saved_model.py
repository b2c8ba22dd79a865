"""SavedModel in TF Serving's layout, verified by loading it back with TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.deploy.formats.base import Converted, Job, Runner, predict_in_chunks
from zoo.deploy.saved_model import SIGNATURE_KEY


def convert(job: Job) -> Converted:
    """Publishes the next version under `<serving_dir or target.path>/<model name>/` atomically,
    with TF Serving warmup records from the evaluation data when real data was given."""
    from zoo.deploy import publish_saved_model

    model = job.keras_model()
    opts = job.target.options
    base = Path(opts.get("serving_dir") or job.target.path)
    path = publish_saved_model(model, base, model.name, version=opts.get("version"), keep=opts.get("keep"),
                               warmup_data=job.array("warmup_x"))
    return Converted(str(path), notes=[f"TF Serving model base path: {path.parent}"])


class SavedModelRunner(Runner):
    runtime = "TensorFlow SavedModel (serving_default)"

    def __init__(self, path):
        import tensorflow as tf

        self._tf = tf
        self._sig = tf.saved_model.load(str(path)).signatures[SIGNATURE_KEY]
        (self._input,) = self._sig.structured_input_signature[1]

    def predict(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return predict_in_chunks(
            lambda b: {k: v.numpy() for k, v in self._sig(**{self._input: self._tf.constant(b)}).items()}, x, 1000
        )


def load(path, job: Job) -> Runner:
    return SavedModelRunner(path)
