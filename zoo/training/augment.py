"""Image augmentations a recipe can name, applied to training batches in the tf.data pipeline.

Specs are strings `"name:amount"`: `translate:0.1` (fraction of the size),
`rotate:0.05` (fraction of a full turn), `zoom:0.1`, `flip` (horizontal).
They run as Keras preprocessing layers on the train split only: inside `Dataset.map` on
TensorFlow, and on each batch of `zoo.data.batches.ArrayBatches` on JAX and PyTorch (the layers
compute in the backend's own ops there).
"""

from __future__ import annotations

import keras
import numpy as np

from zoo.data.batches import ArrayBatches
from zoo.errors import UnknownNameError

_LAYERS = {
    "translate": lambda a, seed: keras.layers.RandomTranslation(a, a, fill_mode="constant", seed=seed, name="translate"),
    "rotate": lambda a, seed: keras.layers.RandomRotation(a, fill_mode="constant", seed=seed, name="rotate"),
    "zoom": lambda a, seed: keras.layers.RandomZoom(a, fill_mode="constant", seed=seed, name="zoom"),
    "flip": lambda a, seed: keras.layers.RandomFlip("horizontal", seed=seed, name="flip"),
}


def parse(specs) -> list[tuple[str, float]]:
    """`["translate:0.1", "flip"]` -> `[("translate", 0.1), ("flip", 0.0)]`, validated."""
    parsed = []
    for spec in specs:
        name, _, amount = str(spec).partition(":")
        if name not in _LAYERS:
            raise UnknownNameError("augmentation", name, _LAYERS)
        try:
            value = float(amount) if amount else 0.0
        except ValueError:
            raise ValueError(f"Augmentation {spec!r}: the amount after ':' must be a number.") from None
        if name != "flip" and not 0 < value < 1:
            raise ValueError(f"Augmentation {spec!r}: the amount must be in (0, 1).")
        parsed.append((name, value))
    return parsed


def apply(ds, specs, seed: int | None = None):
    """Maps the augmentations over a batched `(x, y)` training dataset (`tf.data` or `ArrayBatches`)."""
    parsed = parse(specs)
    if not parsed:
        return ds
    pipeline = keras.Sequential([_LAYERS[n](a, seed) for n, a in parsed], name="augment")
    if isinstance(ds, ArrayBatches):
        return ds.with_augment(lambda x: np.asarray(keras.ops.convert_to_numpy(pipeline(x, training=True))))
    import tensorflow as tf

    return ds.map(lambda x, y: (pipeline(x, training=True), y), num_parallel_calls=tf.data.AUTOTUNE)
