"""Image augmentations a recipe can name, applied to training batches in the tf.data pipeline.

Specs are strings `"name:amount"`: `translate:0.1` (fraction of the size),
`rotate:0.05` (fraction of a full turn), `zoom:0.1`, `flip` (horizontal).
They run as Keras preprocessing layers on the train split only: inside `Dataset.map` on
TensorFlow, and on each batch of `zoo.data.array_batches.ArrayBatches` on JAX and PyTorch (the layers
compute in the backend's own ops there).

Keras is imported by `apply`, not here: `TrainConfig.validate` parses the specs (`parse`), and a plan
(`zoo train --dry-run`) imports no Keras.
"""

from __future__ import annotations

import random

import numpy as np

from zoo.errors import UnknownNameError

# name -> the layer, from `keras.layers` (passed in: see the module docstring), the amount and the seed.
_LAYERS = {
    "translate": lambda layers, a, seed: layers.RandomTranslation(a, a, fill_mode="constant", seed=seed,
                                                                  name="translate"),
    "rotate": lambda layers, a, seed: layers.RandomRotation(a, fill_mode="constant", seed=seed, name="rotate"),
    "zoom": lambda layers, a, seed: layers.RandomZoom(a, fill_mode="constant", seed=seed, name="zoom"),
    "flip": lambda layers, a, seed: layers.RandomFlip("horizontal", seed=seed, name="flip"),
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


def apply(ds, specs, seed: int | None = None, start: int | None = None):
    """Maps the augmentations over a batched `(x, y)` training dataset (`tf.data` or `ArrayBatches`).

    With `start`, `ds` is the train split's stream from global batch `start` (`zoo.data.batches`), and
    the draws of global batch `g` are keyed by `(seed, g)` (`zoo.core.seeds`): a resumed run's stream,
    which starts past the batches already trained on, augments every batch as the uninterrupted run
    did, with no generator state to back up. Without it (one epoch, iterated again every epoch) the
    layers draw from their own generators, anew each epoch.
    """
    parsed = parse(specs)
    if not parsed:
        return ds
    import keras

    from zoo.data.array_batches import ArrayBatches

    layers = [_LAYERS[n](keras.layers, a, seed) for n, a in parsed]
    if start is None:
        pipeline = keras.Sequential(layers, name="augment")

        def augment(x, batch):
            return pipeline(x, training=True)
    else:
        base = (seed if seed is not None else random.randrange(_KEY_RANGE)) % _KEY_RANGE

        def augment(x, batch):
            return _keyed(layers, base, x, batch)

    if isinstance(ds, ArrayBatches):  # it passes each batch's number in its stream
        return ds.with_augment(lambda x, batch: np.asarray(keras.ops.convert_to_numpy(augment(x, batch))))
    import tensorflow as tf

    if start is None:
        return ds.map(lambda x, y: (augment(x, None), y), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.enumerate(start).map(lambda g, xy: (augment(xy[0], g), xy[1]), num_parallel_calls=tf.data.AUTOTUNE)


_KEY_RANGE = 2**31 - 1  # a key's two numbers: non-negative and below every backend's seed bound (int32)
_DRAWS = 2**8  # keys one batch draws apart (each layer draws one or two)


def _keyed(layers, base: int, x, batch):
    """`layers` applied to the batch `x` of global batch `batch`, their draws keyed by `(base, batch)`.

    A layer's own `call` draws from its generator; its `get_random_transformation(seed=...)` draws from the
    one given, and `transform_images` applies the draw, as `call` does with them. In a `tf.data` map the
    layers compute in TensorFlow whatever the backend (as Keras' `DataLayer.__call__` makes them).
    """
    import keras.src.backend

    from zoo.core.seeds import Keyed

    in_graph = not isinstance(batch, (int, np.integer))  # a tf.data map's batch number is a tensor
    if in_graph:
        import tensorflow as tf

        def keys(draw):
            second = tf.math.floormod(tf.cast(batch, tf.int64) * _DRAWS + draw, _KEY_RANGE)
            return tf.stack([tf.constant(base, tf.int64), second])
    else:
        def keys(draw):
            return keras.ops.convert_to_tensor([base, (batch * _DRAWS + draw) % _KEY_RANGE],
                                               keras.src.backend.random_seed_dtype())

    generator = Keyed(keys)
    for layer in layers:
        if in_graph:
            layer.backend.set_backend("tensorflow")
        try:
            transformation = layer.get_random_transformation(x, training=True, seed=generator)
            x = layer.transform_images(x, transformation, training=True)
        finally:
            if in_graph:
                layer.backend.reset()
    return x

