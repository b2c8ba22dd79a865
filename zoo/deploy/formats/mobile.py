"""The pieces of a TFLite model that mobile clients take as it is (issue 28's `--mobile`), and the standard
metadata every TFLite artifact carries.

MediaPipe Tasks' `ImageClassifier` (the same C++ on Android, iOS and the web) and the TFLite Task
Library take an image input of depth 3 or 4, of type float32 (with NormalizationOptions metadata)
or uint8, and read the class names from the model's standard metadata:

- `rgb_front` (a Keras model) and `rgb_front_saved_model` (a SavedModel, what `zoo export --mobile`
  converts): a grayscale image model behind an RGB input that averages the channels in the graph (a
  grayscale picture decoded as RGB has R = G = B, so the average is its gray value exactly);
- `uint8_io`: the converter settings of a full-int8 model with uint8 input and output (both clients
  refuse int8 tensors: "Requested one of these types: uint8/float32, got INT8"); `set_uint8_input`
  makes its input read stored pixels as the graph expects (the converter takes the input's range from
  the calibration data, which need not span 0-255), and `uint8_input_matches` checks it;
- `standard_metadata`: the TFLITE_METADATA (`tflite_metadata`) of any TFLite model, derived from zoo's
  own metadata (`zoo.deploy.formats.metadata.ModelMetadata`), the model card and the model's tensors, so the
  two stay consistent; `as_artifact_takes` is zoo's metadata of an artifact with an RGB front;
  `write` stores both in one rewrite (a later rewrite of either keeps the packed `labels.txt`), and `holds`
  says whether a file already holds what it would store.

Score calibration (ScoreCalibrationOptions and a TENSOR_AXIS_SCORE_CALIBRATION file) is not written:
it holds per-class parameters of a fitted transformation of uncalibrated scores (tflite-support's
`metadata_schema.fbs`), and zoo fits none; a softmax output is described as probabilities (range 0-1),
any other as scores without a range.
"""

from __future__ import annotations


import numpy as np

from zoo.deploy.formats import text_front, tflite_metadata
from zoo.deploy.formats.tflite_file import TFLiteFile

ARTIFACT_SUFFIX = "_mobile"  # "{model}_{variant}_mobile.tflite": not mistaken for the plain artifact


def rgb_front(model, input_name: str | None = None):
    """`model` (one image input of depth 1) behind an RGB input of the same height and width, whose
    channels are averaged in the graph; other models are returned as they are."""
    import keras

    from zoo.deploy.formats.mobile_layers import ChannelMean

    (only, *more) = model.inputs
    if more or len(only.shape) != 4 or only.shape[-1] != 1:
        return model
    rgb = keras.Input((*only.shape[1:3], 3), name=input_name or only.name.split(":")[0], dtype=only.dtype)
    return keras.Model(rgb, model(ChannelMean(name="rgb_to_gray")(rgb)), name=f"{model.name}_rgb")


def rgb_front_saved_model(saved_model_dir: str, out_dir: str) -> str:
    """The SavedModel at `saved_model_dir` (its `serving_default` takes one image of depth 1) behind an RGB
    input of the same name, height and width whose channels are averaged in the graph (`rgb_front`'s
    arithmetic), written to `out_dir` with the same signature name and output names; returns `out_dir`."""
    import tensorflow as tf

    from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE

    loaded = tf.saved_model.load(saved_model_dir)
    serve = loaded.signatures[SERVING_SIGNATURE]
    specs = serve.structured_input_signature[1]
    if len(specs) != 1:
        raise ValueError(f"an RGB front takes a model with one image input; this one takes {sorted(specs)}.")
    ((name, spec),) = specs.items()
    shape = spec.shape.as_list()
    if len(shape) != 4 or shape[-1] != 1:
        raise ValueError(f"an RGB front takes a grayscale image input (batch, height, width, 1); {name!r} is "
                         f"{shape}.")

    class Front(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = loaded  # tracked: its variables are saved with the front

        @tf.function(input_signature=[tf.TensorSpec([*shape[:3], 3], spec.dtype, name=name)])
        def serve(self, image):
            return serve(**{name: tf.reduce_mean(image, axis=-1, keepdims=True, name="rgb_to_gray")})

    front = Front()
    tf.saved_model.save(front, out_dir, signatures={SERVING_SIGNATURE: front.serve.get_concrete_function()})
    return out_dir


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


def uint8_quantization(mean, std) -> tuple[float, int]:
    """(scale, zero point) of a uint8 input that reads a stored pixel p as `(p - mean) / std`; per-channel
    mean and std must agree across channels (a uint8 tensor has one scale and zero point)."""
    mean, std = np.atleast_1d(np.asarray(mean, np.float64)), np.atleast_1d(np.asarray(std, np.float64))
    if np.ptp(mean) > 1e-6 * max(1.0, np.abs(mean).max()) or np.ptp(std) > 1e-6 * np.abs(std).max():
        raise ValueError(f"a uint8 input has one scale and zero point, and this model's input normalization differs "
                         f"by channel (mean {mean.tolist()}, std {std.tolist()}): put the normalization inside the "
                         "model (e.g. a Normalization layer) for a uint8 mobile artifact, or export float32.")
    zero = float(mean[0])
    if not 0 <= round(zero) <= 255:
        raise ValueError(f"a uint8 input's zero point is the normalization mean, {zero:g}, which is not a pixel "
                         "value 0-255.")
    return float(1.0 / std[0]), int(round(zero))


def set_uint8_input(model_bytes: bytes, scale: float, zero_point: int) -> bytes:
    """The model with its uint8 inputs quantized as `(scale, zero_point)`, so a client's stored pixels are read
    as the graph expects.

    The converter quantizes a uint8 input with the range the calibration data reached (e.g. scale
    0.937 for pixels up to 239), while a client feeds raw pixels. A uint8 input is followed by
    QUANTIZE ops to the graph's int8 (`modify_model_interface`); QUANTIZE requantizes between any
    scales, so only the input's own parameters change, and pixels outside the calibrated range are
    clipped by the int8 tensor as before. Raises where an op other than QUANTIZE reads the input.
    """
    model = TFLiteFile(model_bytes)
    uint8 = [t for t in model.inputs() if t.type == "UINT8"]
    for tensor in uint8:
        others = sorted({op.name for op in model.ops(0) if tensor.index in op.inputs and op.name != "QUANTIZE"})
        if others:
            raise ValueError(f"uint8 input {tensor.name!r} is read by {', '.join(others)} besides QUANTIZE; its "
                             "quantization cannot be changed alone.")

    def edit(parsed):
        for tensor in uint8:
            quantization = parsed.subgraphs[0].tensors[tensor.index].quantization
            quantization.scale = [float(scale)]
            quantization.zeroPoint = [int(zero_point)]

    return model.rewrite(edit)


def image_input_shape(model: TFLiteFile) -> tuple | None:
    """(height, width, channels) of the model's one image-shaped input (rank 4, depth 1, 3 or 4), else None;
    read from the flatbuffer's tables, without an interpreter."""
    inputs = model.inputs()
    if len(inputs) != 1 or len(inputs[0].shape) != 4 or inputs[0].shape[-1] not in (1, 3, 4):
        return None
    return inputs[0].shape[1:]


def as_artifact_takes(zoo_metadata, model: TFLiteFile):
    """zoo's metadata as it holds for this artifact: an image model of depth 1 whose artifact takes 3 channels
    has an RGB front (`rgb_front_saved_model`), so files are read as RGB (`zoo predict`, `zoo val`); other
    metadata is returned as it is."""
    import dataclasses

    described = getattr(zoo_metadata, "input", None) or {}
    shape = image_input_shape(model)
    if described.get("kind") != "image" or described.get("channels") != 1 or shape is None or shape[-1] != 3:
        return zoo_metadata
    source = dict(zoo_metadata.source)
    if isinstance(source.get("reading"), dict) and "color_mode" in source["reading"]:
        source["reading"] = {**source["reading"], "color_mode": "rgb"}
    return dataclasses.replace(
        zoo_metadata, input={**described, "channels": 3, "rgb_front": "channels averaged to gray inside the model"},
        description=f"{zoo_metadata.description}; RGB input, its channels averaged to gray inside the model (mobile)",
        source=source)


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
    producers = {}
    for op in interpreter._get_ops_details():  # the public API lists tensors, not ops
        for index in op["outputs"]:
            producers[index] = op
    for d in (*inputs, *outputs):
        d["name"] = names.get(d["index"], d["name"])
    for d in outputs:
        d["softmax"] = _made_by_softmax(d["index"], producers)
    return inputs, outputs


# Ops that pass a tensor's values on without changing what they mean (the quantized output's boundary).
_PASS_THROUGH = ("QUANTIZE", "DEQUANTIZE", "RESHAPE", "IDENTITY")


def _made_by_softmax(index: int, producers: dict) -> bool:
    """Whether the tensor is a SOFTMAX's output, through (de)quantization and reshapes."""
    op = producers.get(index)
    while op is not None and op["op_name"] in _PASS_THROUGH and len(op["inputs"]):
        op = producers.get(op["inputs"][0])
    return op is not None and op["op_name"] == "SOFTMAX"


def standard_metadata(model_bytes: bytes, zoo_metadata, *, name: str, version: str = "", author: str = "",
                      license: str = "", description: str = "") -> tuple[dict, dict[str, bytes]]:
    """(ModelMetadata dict, packed files) for a TFLite model whose zoo metadata is `zoo_metadata` (or None).

    An image input (zoo's `input.kind == "image"`) gets ImageProperties and the NormalizationOptions of
    its scale ("0-255": a model with Rescaling(1/255) inside; "0-1") and any client-side mean/std, and
    the range the normalized pixels span; the output zoo names (`zoo_metadata.output`) of a classifier
    gets the class names as `labels.txt`, described as probabilities where a softmax makes it; every
    other tensor the generic metadata (its name, and its dtype and shape as the description). The
    description defaults to zoo's: the task, the classes and what the input means."""
    inputs, outputs = _tensors(tflite_metadata.split(model_bytes)[0])
    described = zoo_metadata.input if zoo_metadata is not None else {}
    image = described.get("kind") == "image" and len(inputs) == 1 and len(inputs[0]["shape"]) == 4
    front = _regex_front(zoo_metadata, inputs)
    files = {}
    input_meta = []
    for tensor in inputs:
        if front is not None:
            files[text_front.VOCABULARY_FILE] = front.regex_vocabulary()
            input_meta.append(tflite_metadata.text_input(_short(tensor["name"]), delimiter=text_front.DELIMITER,
                                                         vocabulary_file=text_front.VOCABULARY_FILE))
        elif image:
            _, height, width, channels = (int(d) for d in tensor["shape"])
            mean, std = tflite_metadata.normalization(described.get("scale", "0-1"), described.get("mean"),
                                                      described.get("std"))
            input_meta.append(tflite_metadata.image_input(_short(tensor["name"]), channels=channels, height=height,
                                                          width=width, mean=mean, std=std))
        else:
            input_meta.append(tflite_metadata.feature_tensor(_short(tensor["name"]), _what(tensor)))
    class_names = getattr(zoo_metadata, "class_names", None)
    output_meta = []
    for i, tensor in enumerate(outputs):
        scores = class_names and int(tensor["shape"][-1]) == len(class_names) and \
            tflite_metadata.LABELS_FILE not in files and \
            (_short(tensor["name"]) == zoo_metadata.output or len(outputs) == 1 or i == len(outputs) - 1)
        if scores:
            files[tflite_metadata.LABELS_FILE] = "".join(f"{c}\n" for c in class_names).encode()
            output_meta.append(tflite_metadata.class_scores(_short(tensor["name"]), probabilities=tensor["softmax"]))
        else:
            output_meta.append(tflite_metadata.feature_tensor(_short(tensor["name"]), _what(tensor)))
    metadata = tflite_metadata.model_metadata(
        name=name, description=description or _description(zoo_metadata, name), version=version,
        author=author, license=license, inputs=input_meta, outputs=output_meta)
    return metadata, files


def _regex_front(zoo_metadata, inputs: list[dict]):
    """The model's carried text front-end (`text_front.TextFront`) where MediaPipe's RegexTokenizer can stand in
    for it on this file's one int32 input of shape (1, sequence length), else None."""
    front = text_front.of_metadata(zoo_metadata.to_json()) if getattr(zoo_metadata, "front_end", None) else None
    if front is None or not front.regex_matches or len(inputs) != 1:
        return None
    shape = [int(d) for d in inputs[0]["shape"]]
    return front if np.dtype(inputs[0]["dtype"]) == np.int32 and shape[1:] == [front.sequence_length] else None


def _what(tensor: dict) -> str:
    """A generic tensor's description: its dtype and shape (the batch axis as -1 where it is free)."""
    shape = [int(d) for d in tensor.get("shape_signature", tensor["shape"])]
    return f"{np.dtype(tensor['dtype']).name} {shape}"


def _description(zoo_metadata, name: str) -> str:
    """The model's one-line description from zoo's metadata: task, classes, what the input means."""
    if zoo_metadata is None:
        return name
    classes = zoo_metadata.class_names
    task = zoo_metadata.task + (f" of {len(classes)} classes ({', '.join(classes[:10])}"
                                f"{', ...' if len(classes) > 10 else ''})" if classes else "")
    return f"{name}: {task}; input: {zoo_metadata.description}" if zoo_metadata.description else f"{name}: {task}"


def _short(tensor_name: str) -> str:
    """"serving_default_image:0" -> "image"; "StatefulPartitionedCall:0" stays (minus the port)."""
    base = tensor_name.split(":")[0]
    return base[len("serving_default_"):] if base.startswith("serving_default_") else base


CARD = ("name", "version", "author", "license")  # the ModelMetadata fields a model card fills


def write(path, zoo_metadata, **card) -> dict:
    """Stores zoo's own metadata entry (as `as_artifact_takes` says it holds for this file; none where
    `zoo_metadata` is None) and the standard metadata (with its packed files) in the TFLite file at
    `path` in one rewrite, atomically; returns the standard metadata written. `card`: name, version,
    author, license, description (see `standard_metadata`); the card fields not given are kept from
    the file's standard metadata, the name defaulting to the file's stem."""
    from pathlib import Path

    from zoo.fileio import atomic_write_bytes
    from zoo.deploy.formats.metadata import KEY

    path = Path(path)
    model = TFLiteFile(tflite_metadata.split(path.read_bytes())[0])
    previous = model.metadata(tflite_metadata.NAME)
    kept = tflite_metadata.decode("ModelMetadata", previous) if previous else {}
    card = {**{k: kept[k] for k in CARD if kept.get(k)}, **{k: v for k, v in card.items() if v}}
    card.setdefault("name", path.stem)
    zoo_metadata = as_artifact_takes(zoo_metadata, model)
    metadata, files = standard_metadata(model.data, zoo_metadata, **card)
    entries = {tflite_metadata.NAME: tflite_metadata.to_bytes(metadata)}
    if zoo_metadata is not None:
        entries[KEY] = zoo_metadata.to_json().encode()
    atomic_write_bytes(path, tflite_metadata.join(model.with_metadata(entries), files))
    return metadata


def holds(path, zoo_metadata) -> bool:
    """Whether the TFLite file at `path` already holds what `write(path, zoo_metadata)` would store: zoo's entry
    as it holds for the file (`as_artifact_takes`), beside standard metadata."""
    from zoo.deploy.formats.metadata import KEY

    model = TFLiteFile.read(path)
    stored = model.metadata(KEY)
    if stored is None or model.metadata(tflite_metadata.NAME) is None:
        return False
    return stored.decode() == as_artifact_takes(zoo_metadata, model).to_json()
