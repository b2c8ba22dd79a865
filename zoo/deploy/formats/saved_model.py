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
        self.inputs = dict(self._sig.structured_input_signature[1])  # input name -> TensorSpec

    def predict(self, x) -> dict[str, np.ndarray]:
        """`x`: an array for a one-input model, or a dict of arrays keyed by input name."""
        if not isinstance(x, dict):
            (name,) = self.inputs
            return predict_in_chunks(lambda b: self._call({name: b}), x, 1000)
        n = len(next(iter(x.values())))
        parts: dict = {}
        for start in range(0, n, 1000):
            for k, v in self._call({k: a[start:start + 1000] for k, a in x.items()}).items():
                parts.setdefault(k, []).append(v)
        return {k: np.concatenate(v) for k, v in parts.items()}

    def _call(self, feed: dict) -> dict:
        return {k: v.numpy() for k, v in self._sig(**{n: self._tf.constant(a) for n, a in feed.items()}).items()}


def load(path, job: Job) -> Runner:
    return SavedModelRunner(path)
