"""SavedModel export through Keras 3's `ExportArchive`: the graph every other format converts from.

The `serving_default` signature takes the model's inputs by name (e.g. `image`,
not `args_0`; see `zoo.deploy.trace` for how any Keras model, subclassed ones
included, gets its names) with a dynamic batch axis, and returns a dict keyed
by the output names (e.g. `predictions`). That is what TF Serving's REST and
gRPC APIs address. Layers whose TensorFlow lowering converters cannot take are
traced through `zoo.deploy.layer_rewrites`.
"""

from __future__ import annotations

from pathlib import Path

import keras
import tensorflow as tf

from zoo.deploy.trace import Signature, name_outputs, signature_of

SIGNATURE_KEY = "serving_default"


def input_specs(model: keras.Model, batch_size: int | None = None, signature: Signature | None = None
                ) -> list[tf.TensorSpec]:
    """One `TensorSpec` per model input: its name and a dynamic (or the given) batch axis."""
    return (signature or signature_of(model)).specs(batch_size)


def serving_fn(model: keras.Model, signature: Signature | None = None):
    """A function of the model's inputs (positional, in signature order) returning `{output_name: tensor}`."""
    signature = signature or signature_of(model)

    def serve(*inputs):
        args = signature.pack(dict(zip(signature.names, inputs)))
        return name_outputs(model, model(*args, training=False))

    return serve


def export_saved_model(model: keras.Model, path: Path | str, batch_size: int | None = None,
                       signature: Signature | None = None) -> Path:
    """Writes `model` as a SavedModel with a `serving_default` signature into `path`.

    `path` must not exist yet; see `zoo.deploy.serving.layout.publish` for
    the versioned, atomic TF Serving layout. `batch_size` fixes the batch
    axis (TFLite's route for RNNs); by default it is dynamic. `signature`
    (from `zoo.deploy.trace.signature_of`) is needed for a subclassed model
    that was never built.
    """
    from zoo.deploy.layer_rewrites import portable_layers

    path = Path(path)
    signature = signature or signature_of(model)
    archive = keras.export.ExportArchive()
    archive.track(model)
    with portable_layers(model):
        archive.add_endpoint(SIGNATURE_KEY, serving_fn(model, signature), input_signature=signature.specs(batch_size))
        archive.write_out(str(path), verbose=False)
    return path
