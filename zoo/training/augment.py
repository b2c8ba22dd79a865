"""Image augmentations a recipe can name, applied to training batches in the tf.data pipeline.

Specs are strings `"name:amount"`: `translate:0.1` (fraction of the size),
`rotate:0.05` (fraction of a full turn), `zoom:0.1`, `flip` (horizontal).
They run as Keras preprocessing layers inside `Dataset.map`, on the train
split only.
"""

from __future__ import annotations

import keras
import tensorflow as tf

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


def apply(ds: tf.data.Dataset, specs, seed: int | None = None) -> tf.data.Dataset:
    """Maps the augmentations over a batched `(x, y)` training dataset."""
    parsed = parse(specs)
    if not parsed:
        return ds
    pipeline = keras.Sequential([_LAYERS[n](a, seed) for n, a in parsed], name="augment")
    return ds.map(lambda x, y: (pipeline(x, training=True), y), num_parallel_calls=tf.data.AUTOTUNE)
