"""SavedModel -> TFLite with TensorFlow's converter: the route an RNN needs, the converter's settings for
each precision, post-training int8 and its checks, and the `mobile` front.

Recurrent models need a route, because Keras 3's LSTM/GRU/SimpleRNN trace to a
`tf.while_loop` over TensorLists whose element shape depends on the batch:

- `dynamic_batch`: the plain signature. Used for everything without RNN layers.
  With RNNs the converter fails ("'tf.TensorListReserve' op requires
  element_shape to be static"), and the Flex fallback it suggests cannot run in
  the Python interpreter, so it is not tried.
- `fixed_batch`: a batch-1 signature (the time axis may stay dynamic). The
  TensorLists become static and lower to builtin WHILE; float32, float16 and
  dynamic-range int8 convert. Full int8 on this route segfaults the converter.
- `unrolled`: the model rebuilt with `unroll=True` and a static time axis, the
  weights copied. A plain feed-forward graph: every precision, full int8 included,
  at the price of a fixed sequence length (`Conversion.unrolled_saved_model`, shared with TF.js).

float16 and dynamic-range int8 are the converter's `Optimize.DEFAULT` settings; full int8 calibrates on
the export's calibration data (or uses a quantization-aware model's learned ranges), and with an int8
guard (`max_accuracy_drop`, `min_agreement`) keeps the most sensitive layers float through the
converter's own quantizer (`zoo.deploy.formats.ptq.budget`, `ptq.tflite_denylist`). A refusal is
diagnosed by `zoo.deploy.formats.tflite_diagnose`; the artifact's metadata is written by
`zoo.deploy.formats.mobile.write`.
"""

from __future__ import annotations

import numpy as np

from zoo.deploy.formats.jobs import CALIBRATION, Attempt, Converted, RoutesFailed, unrolled_note
from zoo.deploy.formats.options import GUARDED, INT8_GUARDS
from zoo.deploy.formats.ptq import litert_quantizer
from zoo.deploy.formats.ptq.budget import Goal
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE
from zoo.deploy.formats.tflite_diagnose import flex_hint, refusal
from zoo.deploy.formats.tflite_file import TFLiteFile
from zoo.deploy.formats.tflite_runner import open_runner
from zoo.fileio import atomic_output


def routes(recurrent: bool, precision: str) -> list[str]:
    """Routes to try, in order, for a model with (or without) RNN layers and this precision."""
    if not recurrent:
        return ["dynamic_batch"]
    if precision == "int8":
        return ["unrolled"]  # fixed_batch + full int8 segfaults the converter
    if precision in litert_quantizer.RECIPES and litert_quantizer.RECIPES[precision].calibrated:
        return ["unrolled"]  # the quantizer's static recipes leave a WHILE loop's body float (litert_quantizer)
    return ["fixed_batch", "unrolled"]


def _saved_model_for(conversion, route: str, example_shape: tuple) -> str:
    """The SavedModel a route converts from; its `serving_default` keeps the input and output names."""
    if route == "dynamic_batch":
        return conversion.saved_model()
    if route == "fixed_batch":
        return conversion.saved_model("fixed_batch", batch_size=1)
    if route == "unrolled":
        return conversion.unrolled_saved_model(example_shape)
    raise ValueError(f"Unknown TFLite route {route!r}.")


def make_converter(saved_model_dir: str, allow_flex: bool = False):
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir, signature_keys=[SERVING_SIGNATURE])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if allow_flex:  # the user's explicit choice; Keras' own LiteRT export turns this on by default
        converter.target_spec.supported_ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    return converter


def _representative(conversion, example_shape, rgb: bool = False):
    """Calibration batches of one example, by input name (the converter feeds the signature by name);
    `rgb`: grayscale images repeated to R = G = B, for a graph behind an RGB front."""
    x = conversion.numeric_inputs(CALIBRATION)
    n = min(len(next(iter(x.values()))), conversion.target.options.get("calibration_samples") or 200)

    def gen():
        for i in range(n):
            batch = {}
            for name, value in x.items():
                v = np.asarray(value[i : i + 1])
                v = v.astype(np.float32) if v.dtype.kind == "f" else v
                v = np.repeat(v, 3, -1) if rgb else v
                batch[name] = v.reshape(1, *example_shape) if example_shape is not None else v
            yield batch

    return gen


def _quantize(converter, conversion, example_shape, quantization_aware: bool = False, rgb: bool = False):
    import tensorflow as tf

    variant = conversion.target.variant
    if variant == "float32" or variant in litert_quantizer.RECIPES:  # the LiteRT Quantizer's: a float file first
        return
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "float16":
        converter.target_spec.supported_types = [tf.float16]
    elif variant == "int8":
        if quantization_aware:
            # The ranges are the model's fake-quantization ops (the converter's QAT mode): no calibration.
            # TFLITE_BUILTINS_INT8 is not set: TF 2.21 then demands a representative dataset before it
            # looks at the graph (lite.py `_validate_int8_required` with graph_def=None for SavedModels);
            # `check_full_int8` verifies the result instead.
            pass
        else:
            converter.representative_dataset = _representative(conversion, example_shape, rgb)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            if conversion.target.options.get("allow_flex"):
                converter.target_spec.supported_ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
        if conversion.target.options.get("int8_io"):
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
        elif conversion.target.options.get("mobile"):  # the clients take uint8 or float32 tensors, never int8
            converter.inference_input_type = tf.uint8
            converter.inference_output_type = tf.uint8
    # dynamic_int8: Optimize.DEFAULT without representative data quantizes the weights only.



def convert(conversion) -> Converted:
    options, variant = conversion.target.options, conversion.target.variant
    guard = next((g for g in INT8_GUARDS if options.get(g) is not None), None) if variant in GUARDED else None
    budgeted = guard is not None
    example_shape = conversion.static_input_shape() if conversion.model.recurrent else None
    quantization_aware = conversion.model.quantization_aware
    recipe = litert_quantizer.RECIPES.get(variant)
    if recipe is not None and quantization_aware:
        raise ValueError(f"precision {variant!r} is LiteRT's quantizer, which calibrates its own ranges and ignores a "
                         "quantization-aware model's learned ones; export precision='int8' (the converter's int8 "
                         "from those ranges).")
    if recipe is not None and options.get("int8_io"):
        raise ValueError(f"int8_io is the converter's int8 with int8 input and output tensors; precision {variant!r} "
                         "(LiteRT's quantizer) keeps float input and output. Export precision='int8' with int8_io.")
    if budgeted and quantization_aware:
        raise ValueError(f"{guard} is for post-training int8; a quantization-aware model's int8 already "
                         f"uses its learned ranges. Export it without {guard}.")
    if budgeted and options.get("int8_io"):
        raise ValueError(f"{guard} keeps some layers float, and int8_io's int8 input and output tensors are not "
                         "written by the selective quantizer; export without int8_io.")
    mobile_front = _mobile_front(conversion, guard) if options.get("mobile") else None
    attempts = []
    for route in routes(conversion.model.recurrent, conversion.target.variant):
        try:
            saved_model_dir = _saved_model_for(conversion, route, example_shape)
            if mobile_front == "rgb":
                saved_model_dir = _rgb_front(conversion, saved_model_dir)
            converter = make_converter(saved_model_dir, options.get("allow_flex"))
            if not budgeted:  # the budget quantizes the float model selectively (below)
                _quantize(converter, conversion, example_shape, quantization_aware, rgb=mobile_front == "rgb")
            flatbuffer = converter.convert()
            if recipe is not None and not budgeted:
                flatbuffer = litert_quantizer.quantize(flatbuffer, variant, _representative(
                    conversion, example_shape, rgb=mobile_front == "rgb")() if recipe.calibrated else None)
            if quantization_aware and conversion.target.variant == "int8":
                check_full_int8(flatbuffer)  # PTQ sets TFLITE_BUILTINS_INT8, which guarantees it
            if options.get("mobile") and conversion.target.variant == "int8" and not budgeted \
                    and mobile_front != "text":
                flatbuffer = _pixels_in(flatbuffer, conversion)
        except Exception as e:  # try the next route; the report keeps why this one failed
            refused = refusal(e, options, conversion.model.layers)
            if refused:  # no route helps: the ops are in the graph whatever the route
                raise refused from None
            attempts.append(Attempt(route, f"{type(e).__name__}: {_last_line(e)}{flex_hint(e, options)}"))
            continue
        notes, details = [], {}
        if budgeted and recipe is not None:
            flatbuffer, details = _guarded_recipe(conversion, flatbuffer, _representative(
                conversion, example_shape, rgb=mobile_front == "rgb")())
            notes.append(f"{Goal.of(options).describe()}: {details['summary']} (LiteRT's quantizer: int16 "
                         "activations for the most sensitive layers first, then float)")
        elif budgeted:
            int8_converter = make_converter(saved_model_dir, options.get("allow_flex"))
            _quantize(int8_converter, conversion, example_shape, rgb=mobile_front == "rgb")
            flatbuffer, details = _guarded_int8(conversion, flatbuffer, int8_converter, example_shape)
            notes.append(f"{Goal.of(options).describe()}: {details['summary']} (the converter's quantizer, "
                         "denylisted layers float)")
        if recipe is not None:
            notes.append(f"{variant}: {recipe.text}, from the float file (float input and output)")
        with atomic_output(conversion.target.path) as tmp:
            tmp.write_bytes(flatbuffer)
            _store_metadata(tmp, conversion.model)
        if mobile_front == "rgb":
            notes.append("mobile: RGB input, its channels averaged to gray in the graph")
        if options.get("mobile") and conversion.target.variant == "int8":
            notes.append(f"mobile: float32 input and output, which the clients take with the normalization metadata "
                         f"(the converter's quantizer writes {guard}'s int8 with float input and output)"
                         if budgeted else "mobile: uint8 input and output (pixels as stored)")
        if quantization_aware and conversion.target.variant == "int8":
            notes.append("int8 ranges learned in quantization-aware training (no calibration)")
        if route == "fixed_batch":
            notes.append("batch axis fixed to 1 (RNN while loop needs static TensorLists)")
        if route == "unrolled":
            notes.append(unrolled_note(example_shape))
        flex = TFLiteFile(flatbuffer).flex_ops
        if flex:
            details["flex_ops"] = flex
            notes.append(f"uses {len(flex)} Flex (TF Select) op(s), allowed by allow_flex: {', '.join(flex)}; the "
                         "app must link the Flex delegate")
        return Converted(conversion.target.path, route=route, attempts=attempts, notes=notes, details=details)
    raise RoutesFailed("no TFLite route converted", attempts)


def _mobile_front(conversion, guard: str | None) -> str | None:
    """"rgb" where a `mobile` artifact needs an RGB front (a grayscale image model), else None, after checking
    that the model is an image model the mobile clients can take."""
    from zoo.deploy.formats.metadata import ModelMetadata

    options, model = conversion.target.options, conversion.model
    if options.get("int8_io"):
        raise ValueError("mobile and int8_io ask for different tensors: the mobile clients take uint8 (mobile), "
                         "microcontrollers int8 (int8_io); export them separately.")
    described = ModelMetadata.from_json(model.metadata).input if model.metadata else {}
    if conversion.front is not None:  # a text classifier: MediaPipe's TextClassifier, its RegexTokenizer in front
        front, classes = conversion.front, ModelMetadata.from_json(model.metadata).class_names
        if not front.regex_matches or not classes:
            raise ValueError(
                f"mobile makes text classifiers for MediaPipe's TextClassifier, whose RegexTokenizer stands in for a "
                "TextVectorization with output_mode='int', split='whitespace', no ngrams, an output_sequence_length "
                f"and punctuation stripped, and which names classes; {model.name}'s {front.layer!r} has "
                f"output_mode={front.output_mode!r}, split={front.split!r}, ngrams={front.ngrams}, "
                f"output_sequence_length={front.sequence_length}, standardize={front.standardize!r}"
                f"{'' if classes else ', and the model names no classes (give --class-names)'}. Export without "
                "mobile: every format takes its raw strings through zoo's front-end declaration.")
        return "text"
    inputs = model.signature.inputs
    shape = inputs[0].shape if len(inputs) == 1 else ()
    if described.get("kind") != "image" or len(shape) != 3 or shape[-1] not in (1, 3, 4):
        what = (f"its input is described as {described.get('kind')!r}" if described else
                "it carries no zoo metadata saying its input is an image")
        raise ValueError(f"mobile makes image models for MediaPipe's ImageClassifier and the TFLite Task Library, "
                         f"which take one image (height, width, 1|3|4); {model.name} takes "
                         f"{model.signature.describe()} and {what}. Give class names (class_names=, --class-names) "
                         "to an image classifier, or export without mobile.")
    return "rgb" if shape[-1] == 1 else None


def _rgb_front(conversion, saved_model_dir: str) -> str:
    """The SavedModel behind an RGB front (`mobile.rgb_front_saved_model`), written once per export."""
    import os

    from zoo.fileio import atomic_dir
    from zoo.deploy.formats import mobile

    path = os.path.join(conversion.work_dir, f"{os.path.basename(saved_model_dir)}_rgb_front")
    if not os.path.isdir(path):  # written atomically: a complete one from an earlier target
        with atomic_dir(path) as tmp:
            os.rmdir(tmp)
            mobile.rgb_front_saved_model(saved_model_dir, str(tmp))
    return path


def _pixels_in(flatbuffer: bytes, conversion) -> bytes:
    """A uint8-input model whose input reads stored pixels as the graph expects (`mobile.set_uint8_input`)."""
    from zoo.deploy.formats import mobile, tflite_metadata
    from zoo.deploy.formats.metadata import ModelMetadata

    described = ModelMetadata.from_json(conversion.model.metadata).input
    mean, std = tflite_metadata.normalization(described.get("scale", "0-1"), described.get("mean"),
                                              described.get("std"))
    return mobile.set_uint8_input(flatbuffer, *mobile.uint8_quantization(mean, std))


def _store_metadata(path, model) -> None:
    """zoo's metadata (where the model has any) and the standard metadata, with the model card's fields,
    written into the TFLite file at `path` (`mobile.write`)."""
    from zoo.deploy.formats import mobile
    from zoo.deploy.formats.metadata import ModelMetadata

    card = {"name": model.name, **model.card}
    mobile.write(path, ModelMetadata.from_json(model.metadata) if model.metadata else None,
                 **{k: card[k] for k in mobile.CARD if card.get(k)})


def _guarded_int8(conversion, float_model: bytes, int8_converter, example_shape) -> tuple[bytes, dict]:
    """Full int8 but the layers the guard keeps float (`zoo.deploy.formats.ptq.budget`), quantized by the converter's
    own quantizer with those layers' ops denylisted (`zoo.deploy.formats.ptq.tflite_denylist`)."""
    from zoo.deploy.formats.ptq import budget
    from zoo.deploy.formats.ptq.tflite_denylist import DenylistQuantizer

    model = conversion.keras_model()
    outputs = [t._keras_history.operation.name for t in model.outputs]
    selective = DenylistQuantizer(int8_converter, output_layers=outputs)
    layers = [layer for layer in budget.quantizable_layers(model) if selective.nodes_of(layer)]
    return _search(conversion, float_model, "budget_tflite", layers, selective.quantize)


# What a guarded LiteRT-Quantizer int8 gives a layer that int8 moves too far, in order: int16 activations (the
# quantizer's a16w8 rules for that layer's scope), then float.
REMEDIES = {"int16": "a16w8", "float": "float"}


def _guarded_recipe(conversion, float_model: bytes, batches) -> tuple[bytes, dict]:
    """a8w8 but the layers the guard picks (`zoo.deploy.formats.ptq.budget`), which get int16 activations first
    and float only where int16 for every candidate is not enough: one calibration, a recipe per trial."""
    from zoo.deploy.formats.ptq import budget
    from zoo.deploy.formats.ptq.litert_selective import layer_regex

    model = conversion.keras_model()
    outputs = [t._keras_history.operation.name for t in model.outputs]
    quantizer = litert_quantizer.RecipeQuantizer(float_model, "a8w8", batches)

    def scope(layer):
        return layer_regex(layer, layer in outputs)

    def quantize(exclude=(), only=None, remedied=None):
        if only is not None:  # only this layer int8: every other one float
            return quantizer.quantize({".*": "float", scope(only): "a8w8"})
        overrides = {scope(n): REMEDIES[r] for n, r in (remedied or {}).items()}
        return quantizer.quantize({**overrides, **{scope(n): "float" for n in exclude}})

    return _search(conversion, float_model, "budget_litert", budget.quantizable_layers(model), quantize,
                   remedies=tuple(REMEDIES))


def _search(conversion, float_model: bytes, name: str, layers, quantize, **options) -> tuple[bytes, dict]:
    """`budget.run` over `layers`, each trial's flatbuffer (`quantize(exclude=, only=, ...)` -> bytes) written to a
    scratch file beside the float one: (the chosen flatbuffer, the search's details)."""
    import os

    from zoo.deploy.formats.ptq import budget

    scratch = os.path.join(conversion.work_dir, f"{name}_{os.getpid()}")
    os.makedirs(scratch, exist_ok=True)
    float_path = os.path.join(scratch, "float32.tflite")
    with open(float_path, "wb") as f:
        f.write(float_model)
    counter = iter(range(10**6))

    def write(**trial):
        path = os.path.join(scratch, f"trial_{next(counter)}.tflite")
        with open(path, "wb") as f:
            f.write(quantize(**trial))
        return path

    result = budget.run(conversion, layers, write, float_path, open_runner, **options)
    with open(result.chosen.path, "rb") as f:
        return f.read(), result.details


# Ops that legitimately touch float in a full-int8 model: the conversions at its float input and output.
BOUNDARY_OPS = ("QUANTIZE", "DEQUANTIZE")


def float_ops(flatbuffer: bytes) -> list[str]:
    """The ops of a TFLite model that compute in float (a float32 output), other than the boundary
    (de)quantization, over every subgraph (loop bodies too)."""
    model = TFLiteFile(flatbuffer)
    found = []
    for op in model.ops():
        if op.name in BOUNDARY_OPS:
            continue
        outputs = [model.tensor(i, op.subgraph) for i in op.outputs if i >= 0]
        if any(t.type == "FLOAT32" for t in outputs):
            found.append(f"{op.name} ({outputs[0].name})")
    return found


def check_full_int8(flatbuffer: bytes) -> None:
    """Raises if any op of an int8 TFLite model still computes in float, naming the ops."""
    found = float_ops(flatbuffer)
    if found:
        raise RuntimeError(f"the int8 model still computes {len(found)} op(s) in float: {', '.join(found[:5])}")


def _last_line(e: Exception) -> str:
    lines = [line for line in str(e).strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""

