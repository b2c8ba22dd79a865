"""The SavedModel signature every exported graph is built from, through Keras 3's `ExportArchive`.

The `serving_default` signature (`SERVING_SIGNATURE`) takes the model's inputs by name (e.g.
`image`, not `args_0`; `zoo.formats.trace` says how any Keras model, a subclassed one included,
gets its names) with a dynamic batch axis, and returns a dict keyed by the output names (e.g.
`predictions`). That is what TF Serving's REST and gRPC APIs address, and what the TFLite, TF.js
and ONNX converters start from. Layers whose TensorFlow lowering no converter takes are traced
through `zoo.formats.layer_rewrites`. Imports TensorFlow only when a function runs, so the
constant is cheap to import.
"""

from __future__ import annotations

from pathlib import Path

SERVING_SIGNATURE = "serving_default"
SERVING_TAG = "serve"
# TF Serving's Classify API runs a signature with this method name (tensorflow_serving/servables/tensorflow/
# classifier.cc), taking serialized tf.Examples as `inputs` and returning `classes` and `scores`.
CLASSIFY_SIGNATURE = "classify"
CLASSIFY_METHOD = "tensorflow/serving/classify"
CLASSIFY_INPUT = "inputs"


def input_specs(model, batch_size: int | None = None, signature=None) -> list:
    """One `tf.TensorSpec` per model input: its name and a dynamic (or the given) batch axis."""
    from zoo.formats.trace import signature_of

    return (signature or signature_of(model)).specs(batch_size)


def serving_fn(model, signature=None):
    """A function of the model's inputs (positional, in signature order) returning `{output_name: tensor}`."""
    from zoo.formats.trace import name_outputs, signature_of

    signature = signature or signature_of(model)

    def serve(*inputs):
        args = signature.pack(dict(zip(signature.names, inputs)))
        return name_outputs(model, model(*args, training=False))

    return serve


def classify_fn(model, signature, class_names, output: str):
    """TF Serving's classify signature for a classifier: serialized `tf.Example`s in (one feature per model
    input, named as the input, its values flattened), `classes` (the class names, per example) and
    `scores` (the `output` predictions) out. Returns None where an input's per-example shape is not fully
    known (a `tf.Example` feature parses to a fixed shape only)."""
    import tensorflow as tf

    from zoo.formats.trace import name_outputs

    features = {}
    for info in signature.inputs:
        if any(d is None for d in info.shape):
            return None
        parsed = tf.string if info.is_string else tf.float32 if info.dtype.startswith(("float", "bfloat")) \
            else tf.int64  # tf.Example holds float, int64 and bytes lists only
        features[info.name] = tf.io.FixedLenFeature(info.shape, parsed)
    labels = tf.constant(list(class_names))

    def classify(serialized):
        parsed = tf.io.parse_example(serialized, features)
        named = {info.name: tf.cast(parsed[info.name], info.dtype) if not info.is_string else parsed[info.name]
                 for info in signature.inputs}
        scores = name_outputs(model, model(*signature.pack(named), training=False))[output]
        batch = tf.shape(serialized)[0]
        return {"classes": tf.tile(labels[tf.newaxis], [batch, 1]), "scores": tf.cast(scores, tf.float32)}

    return classify


def _set_method_name(path: Path, key: str, method: str) -> None:
    """TensorFlow 2 writes every signature as `tensorflow/serving/predict`; TF Serving's Classify checks for
    its own method name, so the written `saved_model.pb` is patched (atomically)."""
    from tensorflow.core.protobuf import saved_model_pb2

    from zoo.fileio import atomic_write

    proto = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    for graph in proto.meta_graphs:
        if key in graph.signature_def:
            graph.signature_def[key].method_name = method
    atomic_write(path / "saved_model.pb", lambda f: f.write(proto.SerializeToString()))


def export_saved_model(model, path: Path | str, batch_size: int | None = None, signature=None,
                       metadata=None) -> Path:
    """Writes `model` as a SavedModel with a `serving_default` signature into `path`.

    `path` must not exist yet; see `zoo.formats.saved_model_versions.publish` for
    the versioned, atomic TF Serving layout. `batch_size` fixes the batch
    axis (TFLite's route for RNNs); by default it is dynamic. `signature`
    (`zoo.formats.trace.signature_of`) is needed for a subclassed model that
    was never built. `metadata` (`zoo.formats.metadata.ModelMetadata`, default the
    model's own) is written beside the graph; a classifier's class names also give
    the SavedModel `assets/labels.txt` and TF Serving's `classify` signature
    (`classify_fn`), which TF Serving's Classify API and `zoo serve` answer.
    """
    import keras
    import tensorflow as tf

    from zoo.formats import metadata as metadata_lib
    from zoo.formats.layer_rewrites import portable_layers
    from zoo.formats.trace import signature_of

    path = Path(path)
    signature = signature or signature_of(model)
    meta = metadata if metadata is not None else metadata_lib.of_model(model)
    archive = keras.export.ExportArchive()
    archive.track(model)
    classify = None
    with portable_layers(model):
        archive.add_endpoint(SERVING_SIGNATURE, serving_fn(model, signature),
                             input_signature=signature.specs(batch_size))
        if meta is not None and meta.class_names and batch_size is None:
            classify = classify_fn(model, signature, meta.class_names, meta.output)
            if classify is not None:
                archive.add_endpoint(CLASSIFY_SIGNATURE, classify,
                                     input_signature=[tf.TensorSpec([None], tf.string, name=CLASSIFY_INPUT)])
        archive.write_out(str(path), verbose=False)
    if classify is not None:
        _set_method_name(path, CLASSIFY_SIGNATURE, CLASSIFY_METHOD)
    if meta is not None:  # what the model is for, beside the graph (assets.extra/zoo_metadata.json)
        metadata_lib.write(path, meta)
    return path
