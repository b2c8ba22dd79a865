"""The SavedModel signature every exported graph is built from, through Keras 3's `ExportArchive`.

The `serving_default` signature (`SERVING_SIGNATURE`) takes inputs named after the model's
`keras.Input` layers (e.g. `image`, not `args_0`) with a dynamic batch axis, and returns a dict
keyed by the output layer names (e.g. `predictions`). That is what TF Serving's REST and gRPC
APIs address, and what the TFLite and TF.js converters start from. Imports TensorFlow only
when a function runs, so the constant is cheap to import.
"""

from __future__ import annotations

from pathlib import Path

SERVING_SIGNATURE = "serving_default"
SERVING_TAG = "serve"


def input_specs(model, batch_size: int | None = None) -> list:
    """One `tf.TensorSpec` per model input: its layer's name and a dynamic (or the given) batch axis."""
    import tensorflow as tf

    return [
        tf.TensorSpec((batch_size, *t.shape[1:]), t.dtype, name=t._keras_history.operation.name) for t in model.inputs
    ]


def serving_fn(model):
    """A function of the model's named inputs returning `{output_name: tensor}`."""
    import tensorflow as tf

    def serve(*inputs):
        outputs = model(inputs[0] if len(inputs) == 1 else list(inputs), training=False)
        return dict(zip(model.output_names, tf.nest.flatten(outputs)))

    return serve


def export_saved_model(model, path: Path | str, batch_size: int | None = None) -> Path:
    """Writes `model` as a SavedModel with a `serving_default` signature into `path`.

    `path` must not exist yet; see `zoo.deploy.serving.layout.publish` for
    the versioned, atomic TF Serving layout. `batch_size` fixes the batch
    axis (TFLite's route for RNNs); by default it is dynamic.
    """
    import keras

    path = Path(path)
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(SERVING_SIGNATURE, serving_fn(model), input_signature=input_specs(model, batch_size))
    archive.write_out(str(path), verbose=False)
    return path
