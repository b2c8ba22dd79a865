"""The pieces of a TFLite classifier that mobile clients take as it is (issue 28's `--mobile`).

MediaPipe Tasks' `ImageClassifier` (the same C++ on Android, iOS and the web) and the TFLite Task
Library take an image input of depth 3 or 4, of type float32 (with NormalizationOptions metadata)
or uint8, and read the class names from the model's standard metadata:

- `rgb_front`: a grayscale image model behind an RGB input that averages the channels in the graph
  (a grayscale picture decoded as RGB has R = G = B, so the average is its gray value exactly);
- `uint8_io`: the converter settings of a full-int8 model with uint8 input and output (both clients
  refuse int8 tensors: "Requested one of these types: uint8/float32, got INT8"); `uint8_input_matches`
  checks that its input quantization reads stored pixels as the graph expects;
- `standard_metadata`: the TFLITE_METADATA (`tflite_metadata`) of a classifier, derived from zoo's own
  metadata (`zoo.formats.metadata.ModelMetadata`) and the model's tensors, so the two stay consistent;
  `write` stores both in one rewrite (a later rewrite of either keeps the packed `labels.txt`).
"""

from __future__ import annotations

import functools

import numpy as np

from zoo.formats import tflite_metadata

ARTIFACT_SUFFIX = "_mobile"  # "{model}_{variant}_mobile.tflite": not mistaken for the plain artifact


def rgb_front(model, input_name: str | None = None):
    """`model` (one image input of depth 1) behind an RGB input of the same height and width, whose
    channels are averaged in the graph; other models are returned as they are."""
    import keras

    (only, *more) = model.inputs
    if more or len(only.shape) != 4 or only.shape[-1] != 1:
        return model
    rgb = keras.Input((*only.shape[1:3], 3), name=input_name or only.name.split(":")[0], dtype=only.dtype)
    return keras.Model(rgb, model(_channel_mean()(name="rgb_to_gray")(rgb)), name=f"{model.name}_rgb")


@functools.cache
def _channel_mean():
    """The layer class (defined on first use: importing this module imports no Keras)."""
    import keras

    @keras.saving.register_keras_serializable("zoo")
    class ChannelMean(keras.layers.Layer):
        """The mean over the channel axis, kept as an axis of 1 (RGB -> gray)."""

        def call(self, x):
            return keras.ops.mean(x, axis=-1, keepdims=True)

        def compute_output_shape(self, shape):
            return (*shape[:-1], 1)

    return ChannelMean


def uint8_io(converter) -> None:
    """Full-int8 conversion with uint8 input and output tensors (`TFLiteConverter` settings)."""
    import tensorflow as tf

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.uint8
    converter.inference_output_type = tf.uint8


def uint8_input_matches(quantization: tuple[float, int], mean, std, tolerance: float = 0.02) -> bool:
    """Whether a uint8 input quantized as `(scale, zero_point)` reads a stored pixel p as the graph's
    `(p - mean) / std`: the clients feed uint8 pixels as they are, so scale must be 1/std and the
    zero point the mean (within `tolerance`, relative)."""
    scale, zero = quantization
    mean, std = float(np.mean(mean)), float(np.mean(std))
    return abs(scale * std - 1) <= tolerance and abs(zero - mean) <= max(1.0, tolerance * 255)


def _tensors(model_bytes: bytes) -> tuple[list[dict], list[dict]]:
    """(inputs, outputs) of the first subgraph, in its order: shape, dtype, quantization, and as "name"
    the signature's name for the tensor where it has one ("image", "predictions"), else the tensor's."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=model_bytes)
    names = {}
    for key in interpreter.get_signature_list():
        runner = interpreter.get_signature_runner(key)
        for details in (runner.get_input_details(), runner.get_output_details()):
            names.update({d["index"]: name for name, d in details.items()})
        break
    inputs, outputs = interpreter.get_input_details(), interpreter.get_output_details()
    for d in (*inputs, *outputs):
        d["name"] = names.get(d["index"], d["name"])
    return inputs, outputs


def standard_metadata(model_bytes: bytes, zoo_metadata, *, name: str, version: str = "1", author: str = "",
                      license: str = "", description: str = "") -> tuple[dict, dict[str, bytes]]:
    """(ModelMetadata dict, packed files) for a TFLite model whose zoo metadata is `zoo_metadata`.

    An image input (zoo's `input.kind == "image"`) gets ImageProperties and the NormalizationOptions of
    its scale ("0-255": a model with Rescaling(1/255) inside; "0-1") and any client-side mean/std; the
    output zoo names (`zoo_metadata.output`) gets the class names as `labels.txt`; every other tensor
    the generic metadata (name, description)."""
    inputs, outputs = _tensors(tflite_metadata.split(model_bytes)[0])
    described = zoo_metadata.input if zoo_metadata is not None else {}
    image = described.get("kind") == "image" and len(inputs) == 1
    input_meta = []
    for tensor in inputs:
        if image:
            _, height, width, channels = (int(d) for d in tensor["shape"])
            mean, std = tflite_metadata.normalization(described.get("scale", "0-1"), described.get("mean"),
                                                      described.get("std"))
            input_meta.append(tflite_metadata.image_input(_short(tensor["name"]), channels=channels, height=height,
                                                          width=width, mean=mean, std=std))
        else:
            input_meta.append(tflite_metadata.feature_tensor(_short(tensor["name"]), f"{tensor['dtype'].__name__} "
                                                             f"{list(tensor['shape'])}"))
    files = {}
    class_names = getattr(zoo_metadata, "class_names", None)
    output_meta = []
    for i, tensor in enumerate(outputs):
        scores = class_names and int(tensor["shape"][-1]) == len(class_names) and not files and \
            (_short(tensor["name"]) == zoo_metadata.output or len(outputs) == 1 or i == len(outputs) - 1)
        if scores:
            files[tflite_metadata.LABELS_FILE] = "".join(f"{c}\n" for c in class_names).encode()
            output_meta.append(tflite_metadata.class_scores(_short(tensor["name"])))
        else:
            output_meta.append(tflite_metadata.feature_tensor(_short(tensor["name"]), f"{list(tensor['shape'])}"))
    metadata = tflite_metadata.model_metadata(
        name=name, description=description or getattr(zoo_metadata, "description", "") or name, version=version,
        author=author, license=license, inputs=input_meta, outputs=output_meta)
    return metadata, files


def _short(tensor_name: str) -> str:
    """"serving_default_image:0" -> "image"; "StatefulPartitionedCall:0" stays (minus the port)."""
    base = tensor_name.split(":")[0]
    return base[len("serving_default_"):] if base.startswith("serving_default_") else base


def write(path, zoo_metadata, **card) -> dict:
    """Stores zoo's own metadata entry and the standard metadata (with its packed files) in the TFLite
    file at `path` in one rewrite; returns the standard metadata written. `card`: name, version,
    author, license, description (see `standard_metadata`)."""
    import os
    from pathlib import Path

    from zoo.formats.metadata import KEY

    path = Path(path)
    data = path.read_bytes()
    metadata, files = standard_metadata(data, zoo_metadata, **card)
    model, _ = tflite_metadata.split(data)
    entries = {tflite_metadata.NAME: tflite_metadata.to_bytes(metadata)}
    if zoo_metadata is not None:
        entries[KEY] = zoo_metadata.to_json().encode()
    out = tflite_metadata.join(tflite_metadata.with_metadata_buffers(model, entries), files)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(out)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return metadata
