"""The SavedModel signature every exported graph is built from, through Keras 3's `ExportArchive`.

The `serving_default` signature (`SERVING_SIGNATURE`) takes the model's inputs by name (e.g.
`image`, not `args_0`; `zoo.deploy.trace` says how any Keras model, a subclassed one included,
gets its names) with a dynamic batch axis, and returns a dict keyed by the output names (e.g.
`predictions`). That is what TF Serving's REST and gRPC APIs address, and what the TFLite, TF.js
and ONNX converters start from. Layers whose TensorFlow lowering no converter takes are traced
through `zoo.deploy.layer_rewrites`. Imports TensorFlow only when a function runs, so the
constant is cheap to import.
"""

from __future__ import annotations

from pathlib import Path

SERVING_SIGNATURE = "serving_default"
SERVING_TAG = "serve"


def input_specs(model, batch_size: int | None = None, signature=None) -> list:
    """One `tf.TensorSpec` per model input: its name and a dynamic (or the given) batch axis."""
    from zoo.deploy.trace import signature_of

    return (signature or signature_of(model)).specs(batch_size)


def serving_fn(model, signature=None):
    """A function of the model's inputs (positional, in signature order) returning `{output_name: tensor}`."""
    from zoo.deploy.trace import name_outputs, signature_of

    signature = signature or signature_of(model)

    def serve(*inputs):
        args = signature.pack(dict(zip(signature.names, inputs)))
        return name_outputs(model, model(*args, training=False))

    return serve


def export_saved_model(model, path: Path | str, batch_size: int | None = None, signature=None) -> Path:
    """Writes `model` as a SavedModel with a `serving_default` signature into `path`.

    `path` must not exist yet; see `zoo.deploy.serving.layout.publish` for
    the versioned, atomic TF Serving layout. `batch_size` fixes the batch
    axis (TFLite's route for RNNs); by default it is dynamic. `signature`
    (`zoo.deploy.trace.signature_of`) is needed for a subclassed model that
    was never built.
    """
    import keras

    from zoo.deploy.layer_rewrites import portable_layers
    from zoo.deploy.trace import signature_of

    path = Path(path)
    signature = signature or signature_of(model)
    archive = keras.export.ExportArchive()
    archive.track(model)
    with portable_layers(model):
        archive.add_endpoint(SERVING_SIGNATURE, serving_fn(model, signature),
                             input_signature=signature.specs(batch_size))
        archive.write_out(str(path), verbose=False)
    from zoo.deploy import metadata

    meta = metadata.of_model(model)
    if meta is not None:  # what the model is for, beside the graph (assets.extra/zoo_metadata.json)
        metadata.write(path, meta)
    return path
