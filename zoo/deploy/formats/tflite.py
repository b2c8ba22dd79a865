"""TFLite (LiteRT): float32, float16, dynamic-range int8 and full int8, builtin ops only.

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

Every artifact carries zoo's metadata entry and the standard TFLite metadata that MediaPipe Tasks,
the TFLite Task Library and Android Studio's ML Model Binding read (`zoo.deploy.formats.mobile`,
`zoo.deploy.formats.tflite_metadata`), derived from the same facts. `mobile` makes image models those
clients take as they are: an RGB input for a grayscale model, uint8 input and output for full int8.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np

from zoo.core.options import BOOL, Option
from zoo.deploy.formats.base import (CALIBRATION, DEFAULT_THREADS, INT8_GUARDS, INT8_OPTIONS, PRECISION, SEQUENCE_LENGTH,
                              ArtifactError, Attempt, CannotVerify, Converted, Format, RoutesFailed, Runner,
                              atomic_output, head, predict_in_chunks, tensor_info, unrolled_note)
from zoo.deploy.formats.diagnose import OpGap, UnsupportedOpsError, unsupported_ops_error
from zoo.deploy.formats.ptq.budget import Goal
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE
from zoo.deploy.formats.tflite_file import FLEX_PREFIX, IDENTIFIER, NotTFLiteError, TFLiteFile, flex_op
from zoo.deploy.formats.unsafe import CUSTOM_TFLITE_OP, TF_OPS, TFLITE_RUNTIME_CUSTOM_OPS, Finding

# precision (one .tflite each) -> tolerance class
PRECISIONS = {"float32": "float32", "float16": "float16", "dynamic_int8": "int8", "int8": "int8"}

FORMAT = Format(
    name="tflite",
    artifact="{model}_{variant}.tflite",
    runtime="ai_edge_litert Interpreter (XNNPACK)",
    description="LiteRT flatbuffer, builtin ops only unless allow_flex; RNNs via a fixed-batch signature or an "
                "unrolled rebuild",
    layout="a flatbuffer file with the identifier TFL3, usually `*.tflite`",
    metadata_at="a flatbuffer `metadata` entry named `zoo_metadata` (the schema's slot for such data), beside "
                "the standard `TFLITE_METADATA` (ModelMetadata, packed labels.txt) that the mobile clients read",
    scan_reads="the operator codes of every subgraph: custom ops, Flex ops (checked as the TensorFlow op they "
               "run) and StableHLO custom calls",
    check_how="one conversion with Flex and custom ops allowed, of the frozen graph with splat weights: TFLite "
              "publishes no list of the ops its builtins cover",
    recurrent_route="zoo export converts RNN layers through a batch-1 graph, else an unrolled one with a fixed "
                    "sequence length (builtin ops only), instead of this dynamic-batch graph",
    packages=("ai-edge-litert", "ai-edge-quantizer"),
    short="tflite",
    suffixes=(".tflite",),
    variant_option="precision",
    precisions=PRECISIONS,
    marks={"mobile": "_mobile"},
    options=(
        PRECISION,
        Option("int8_io", "full int8 with int8 input and output tensors too (microcontrollers; the mobile clients "
               "refuse int8 tensors: see mobile)", default=False, check=BOOL),
        Option("mobile", "image models that MediaPipe Tasks' ImageClassifier and the TFLite Task Library take as they "
               "are: an RGB input for a grayscale model (its channels averaged in the graph), uint8 input and output "
               "for full int8 (float32 for a selective int8, which the clients take too); written as "
               "{model}_{variant}_mobile.tflite, and run in MediaPipe by zoo export where its client is installed "
               "(the report's mobile client column)", default=False, check=BOOL),
        *INT8_OPTIONS,
        SEQUENCE_LENGTH,
        Option("allow_flex", "let ops without a TFLite builtin run as TensorFlow ops (Flex / TF Select): the "
               "artifact then needs the Flex delegate linked into the app; off by default, never silent",
               default=False, check=BOOL),
    ),
)


def routes(recurrent: bool, precision: str) -> list[str]:
    """Routes to try, in order, for a model with (or without) RNN layers and this precision."""
    if not recurrent:
        return ["dynamic_batch"]
    if precision == "int8":
        return ["unrolled"]  # fixed_batch + full int8 segfaults the converter
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


def _converter(saved_model_dir: str, allow_flex: bool = False):
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir, signature_keys=[SERVING_SIGNATURE])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if allow_flex:  # the user's explicit choice; Keras' own LiteRT export turns this on by default
        converter.target_spec.supported_ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    return converter


def _representative(conversion, example_shape, rgb: bool = False):
    """Calibration batches of one example, by input name (the converter feeds the signature by name);
    `rgb`: grayscale images repeated to R = G = B, for a graph behind an RGB front."""
    x = conversion.inputs(CALIBRATION)
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
    if variant == "float32":
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
    options = conversion.target.options
    guard = (next((g for g in INT8_GUARDS if options.get(g) is not None), None)
             if conversion.target.variant == "int8" else None)
    budgeted = guard is not None
    example_shape = conversion.static_input_shape() if conversion.model.recurrent else None
    quantization_aware = conversion.model.quantization_aware
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
            converter = _converter(saved_model_dir, options.get("allow_flex"))
            if not budgeted:  # the budget quantizes the float model selectively (below)
                _quantize(converter, conversion, example_shape, quantization_aware, rgb=mobile_front == "rgb")
            flatbuffer = converter.convert()
            if quantization_aware and conversion.target.variant == "int8":
                check_full_int8(flatbuffer)  # PTQ sets TFLITE_BUILTINS_INT8, which guarantees it
            if options.get("mobile") and conversion.target.variant == "int8" and not budgeted:
                flatbuffer = _pixels_in(flatbuffer, conversion)
        except Exception as e:  # try the next route; the report keeps why this one failed
            unsupported = tflite_unsupported_ops(str(e))
            if unsupported:  # no route helps: the ops are in the graph whatever the route
                error = unsupported_ops_error("TFLite (builtin ops)", unsupported, conversion.model.layers)
                raise UnsupportedOpsError(f"{error}{_flex_hint(e, options)}", error.ops) from None
            attempts.append(Attempt(route, f"{type(e).__name__}: {_last_line(e)}{_flex_hint(e, options)}"))
            continue
        notes, details = [], {}
        if budgeted:
            int8_converter = _converter(saved_model_dir, options.get("allow_flex"))
            _quantize(int8_converter, conversion, example_shape, rgb=mobile_front == "rgb")
            flatbuffer, details = _guarded_int8(conversion, flatbuffer, int8_converter, example_shape)
            notes.append(f"{Goal.of(options).describe()}: {details['summary']} (the converter's quantizer, "
                         "denylisted layers float)")
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


def tflite_unsupported_ops(message: str) -> dict[str, list[str]]:
    """op -> graph node names, from the converter's "op is neither a custom op nor a flex op" errors.

    The converter reports each as `loc(fused["LookupTableFindV2:", "model_1/lookup_1/None_Lookup/
    LookupTableFindV2@__inference_serve_123"]): error: 'tf.LookupTableFindV2' op is neither a custom op
    nor a flex op`. Ops that only the RNN routes remove (TensorList*) are not listed: those are routes' business.
    """
    import re

    found: dict[str, list[str]] = {}
    for line in message.splitlines():
        match = re.search(r"'tf\.(\w+)' op is neither a custom op nor a flex op", line)
        if not match or match.group(1).startswith("TensorList"):
            continue
        nodes = [n.split("@")[0] for n in re.findall(r'"([^"]+)"', line) if "/" in n]
        found.setdefault(match.group(1), []).extend(nodes or [""])
    return found


def _flex_hint(error: Exception, options: dict) -> str:
    """Where ops lack a TFLite builtin: the ops, and the explicit way to run them anyway."""
    import re

    ops = sorted(set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", str(error))))
    ops = [op for op in ops if not op.startswith("TensorList")]  # the RNN routes' business
    if not ops or options.get("allow_flex"):
        return ""
    return (f" [ops without a TFLite builtin: {', '.join(ops)}; they would run only as Flex (TF Select) ops: pass "
            "allow_flex=True / --allow-flex to allow that]")


FLEX_NEEDS = "the Flex delegate (TF Select: allow_flex=True / --allow-flex, and the app links it)"


def unsupported_ops(traced) -> list[OpGap]:
    """The ops without a TFLite builtin in the model's dynamic-batch graph, and which of them Flex could run.

    TFLite publishes no list of the TensorFlow ops its builtins cover (legalization happens in the
    converter's MLIR passes), so the converter is the only way to know: one conversion with Flex and
    custom ops allowed always completes and marks each op the builtins lack, as a `Flex<Op>` (runs with
    the Flex delegate) or a custom op (nothing in TFLite runs it). Its output tensors keep the graph's
    node names, so each op is traced back to its Keras layer.
    """
    import tensorflow as tf

    from zoo.deploy.formats.diagnose import TABLE_OPS, graph_nodes

    if any(op in TABLE_OPS for op, _ in graph_nodes(traced.graph_def)):
        # Lookup tables are resources, which the frozen-graph path turns into placeholders: the model's own
        # function through the SavedModel path, as export converts it.
        converter = tf.lite.TFLiteConverter.from_concrete_functions([traced.concrete_function], traced.model)
    else:
        # The frozen graph with its weights as one-value (splat) constants: the same ops, shapes and names,
        # without the megabytes the converter would copy and fold (ConvNeXt-T: 9.1 s -> 3.8 s), and no
        # SavedModel written and retraced.
        function, holder = _weightless(traced)
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function], holder)
        converter.experimental_lower_to_saved_model = False
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    converter.allow_custom_ops = True
    try:
        flatbuffer = converter.convert()
    except Exception as e:
        unsupported = tflite_unsupported_ops(str(e))
        if not unsupported:
            raise
        return [OpGap(op, tuple(nodes)) for op, nodes in sorted(unsupported.items())]
    gaps = []
    for code, nodes in sorted(non_builtin_ops(flatbuffer).items()):
        tf_op = flex_op(code)
        gaps.append(OpGap(tf_op, tuple(nodes), needs=FLEX_NEEDS) if tf_op else OpGap(code, tuple(nodes)))
    return gaps


SPLAT_MIN_ELEMENTS = 1024  # float constants this large (weights) become splats for the op check
SPLAT_VALUE = 0.37  # neither 0 nor 1, which the converter could fold away (x * 0, x * 1)


def _weightless(traced):
    """`(function, holder)`: the traced model's frozen graph, its large float constants replaced by splat
    constants of the same shape (a `TensorProto` holding one value), as a concrete function again."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2, tensor_pb2

    graph = graph_pb2.GraphDef()
    graph.CopyFrom(traced.graph_def)
    for node in graph.node:
        if node.op != "Const":
            continue
        tensor = node.attr["value"].tensor
        size = int(np.prod([d.size for d in tensor.tensor_shape.dim])) if tensor.tensor_shape.dim else 1
        if size >= SPLAT_MIN_ELEMENTS and tensor.dtype == tf.float32.as_datatype_enum:
            node.attr["value"].tensor.CopyFrom(tensor_pb2.TensorProto(
                dtype=tensor.dtype, tensor_shape=tensor.tensor_shape, float_val=[SPLAT_VALUE]))
    holder = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph, name=""), [])
    function = traced.concrete_function
    inputs = [holder.graph.get_tensor_by_name(t.name) for t in function.inputs if t.dtype != tf.resource]
    outputs = [holder.graph.get_tensor_by_name(t.name) for t in function.outputs]
    return holder.prune(inputs, outputs), holder


def route_around(traced) -> str | None:
    """For an RNN model: whether `convert`'s `fixed_batch` route (the batch axis fixed to 1, so the loop's
    TensorLists are static and lower to builtins) needs no Flex or custom op, by converting that graph."""
    if not traced.recurrent or traced.retrace is None:
        return None
    if unsupported_ops(traced.retrace(1)):
        return None
    return ("zoo export's fixed_batch route (batch axis fixed to 1) converts it with builtin ops only: "
            "checked by converting that graph")


def non_builtin_ops(flatbuffer: bytes) -> dict[str, list[str]]:
    """custom op code (`Flex<Op>` or a custom op's name) -> the names of the tensors its operators output
    (the first of each), over every subgraph (loop bodies too)."""
    model = TFLiteFile(flatbuffer)
    found: dict[str, list[str]] = {}
    for op in model.ops():
        if op.custom is not None:
            names = [model.tensor(i, op.subgraph).name for i in op.outputs if i >= 0]
            found.setdefault(op.custom, []).append(names[0] if names else "")
    return found


def _guarded_int8(conversion, float_model: bytes, int8_converter, example_shape) -> tuple[bytes, dict]:
    """Full int8 but the layers the guard keeps float (`zoo.deploy.formats.ptq.budget`), quantized by the converter's
    own quantizer with those layers' ops denylisted (`zoo.deploy.formats.ptq.tflite_denylist`)."""
    import os

    from zoo.deploy.formats.ptq import budget
    from zoo.deploy.formats.ptq.tflite_denylist import DenylistQuantizer

    model = conversion.keras_model()
    outputs = [t._keras_history.operation.name for t in model.outputs]
    selective = DenylistQuantizer(int8_converter, output_layers=outputs)
    layers = [layer for layer in budget.quantizable_layers(model) if selective.nodes_of(layer)]
    scratch = os.path.join(conversion.work_dir, f"budget_tflite_{os.getpid()}")
    os.makedirs(scratch, exist_ok=True)
    float_path = os.path.join(scratch, "float32.tflite")
    with open(float_path, "wb") as f:
        f.write(float_model)
    counter = iter(range(10**6))

    def quantize(exclude=(), only=None):
        path = os.path.join(scratch, f"trial_{next(counter)}.tflite")
        with open(path, "wb") as f:
            f.write(selective.quantize(exclude=exclude, only=only))
        return path

    result = budget.run(conversion, layers, quantize, float_path, open_runner)
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


class TFLiteRunner(Runner):
    runtime = "ai_edge_litert Interpreter (XNNPACK)"

    def __init__(self, path, xnnpack: bool = True, num_threads: int = DEFAULT_THREADS):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        # XNNPACK is the default delegate of the builtin op resolver.
        resolver = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self._interpreter = Interpreter(
            model_path=str(path), num_threads=num_threads, experimental_op_resolver_type=resolver
        )
        self._runner = self._interpreter.get_signature_runner(SERVING_SIGNATURE)
        self._invoked = False
        if not xnnpack:
            self.runtime = "ai_edge_litert Interpreter (builtin kernels, no XNNPACK)"
        self._ins = self._runner.get_input_details()
        self._outs = self._runner.get_output_details()
        # int8 and uint8 I/O tensors are (de)quantized here: the spec declares the float they take and return
        self.inputs = tuple(_spec(name, d) for name, d in self._ins.items())
        self.outputs = tuple(_spec(name, d) for name, d in self._outs.items())
        first = next(iter(self._ins.values()))["shape_signature"]
        self.fixed_batch = int(first[0]) if len(first) and first[0] > 0 else None

    @property
    def note(self) -> str:
        notes = [f"fixed batch {self.fixed_batch}: a batch runs as {self.fixed_batch}-example calls"
                 if self.fixed_batch else "", "no XNNPACK" if "no XNNPACK" in self.runtime else ""]
        return "; ".join(n for n in notes if n)

    def _invoke(self, x: dict):
        feed = {}
        for name, value in x.items():
            detail = self._ins[name]
            if detail["dtype"] in QUANTIZED_IO:
                scale, zero = detail["quantization"]
                limits = np.iinfo(detail["dtype"])
                value = np.clip(np.round(value / scale + zero), limits.min, limits.max)
            elif value.dtype.kind == "U":  # string tensors take bytes
                value = np.char.encode(value, "utf-8")
            feed[name] = value.astype(detail["dtype"], copy=False) if value.dtype.kind not in "SU" else value
        if self._invoked:
            out = self._runner(**feed)
        else:  # LiteRT logs "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." on the first call
            from zoo import native_logs

            with native_logs.quiet():
                out = self._runner(**feed)
            self._invoked = True
        for name, detail in self._outs.items():
            if detail["dtype"] in QUANTIZED_IO:
                scale, zero = detail["quantization"]
                out[name] = (out[name].astype(np.float32) - zero) * scale
        return out

    def predict(self, x) -> dict[str, np.ndarray]:
        return predict_in_chunks(self._invoke, self.named(x), self.fixed_batch or 256)


# Quantized input and output tensors: int8 (int8_io, microcontrollers) and uint8 (mobile), (de)quantized by the
# runner with the tensor's own scale and zero point, so it takes and returns floats like every runner.
QUANTIZED_IO = (np.int8, np.uint8)


def _spec(name: str, detail: dict):
    quantized = detail["dtype"] in QUANTIZED_IO and detail["quantization"][0] > 0
    return tensor_info(name, detail["shape_signature"], np.float32 if quantized else detail["dtype"])


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> TFLiteRunner:
    """A runner with XNNPACK, prepared on `example` (one batch; default zeros shaped as its inputs); TFLite's
    own kernels where XNNPACK cannot run it. A model with Flex ops (allow_flex) cannot run here: `CannotVerify`."""
    runner = TFLiteRunner(path, num_threads=threads)
    try:
        runner.predict(runner.example() if example is None else example)
        return runner
    except RuntimeError as e:
        if FLEX_PREFIX in str(e):
            raise CannotVerify(
                "it runs Flex (TF Select) ops, and neither LiteRT 2.3's interpreter nor TensorFlow 2.21's links the "
                "Flex delegate in Python; run it where the app links it (tensorflow-lite-select-tf-ops)") from None
        # XNNPACK refuses to prepare some full-int8 unrolled RNN graphs calibrated on real data
        # ("failed to create XNNPACK runtime"); TFLite's own int8 kernels run them.
        if "XNNPACK" not in str(e):
            raise
        runner = TFLiteRunner(path, xnnpack=False, num_threads=threads)
        runner.runtime += f"; XNNPACK failed to prepare: {str(e).splitlines()[0][:120]}"
        return runner


# ----------------------------------------------------------------------------- on disk: recognised, metadata, scan

def recognise(path: Path) -> bool:
    return path.is_file() and head(path)[4:8] == IDENTIFIER


def write_metadata(path: Path, text: str) -> None:
    """Sets the `zoo_metadata` entry (a flatbuffer `metadata` entry pointing at a buffer holding the JSON,
    replacing an earlier one) and the standard TFLITE_METADATA derived from it, with its packed
    `labels.txt` (`zoo.deploy.formats.mobile.write`), in one rewrite; the model card's fields already in the
    file are kept. Nothing is rewritten where the file already holds both, as they would be written."""
    from zoo.deploy.formats import mobile
    from zoo.deploy.formats.metadata import ModelMetadata

    if not mobile.holds(path, ModelMetadata.from_json(text)):
        mobile.write(path, ModelMetadata.from_json(text))


def read_metadata(path: Path) -> str | None:
    from zoo.deploy.formats.metadata import KEY

    stored = TFLiteFile.read(path).metadata(KEY)
    return None if stored is None else stored.decode()


def _entry(op):
    """(unsafe table entry, op name, why) for one operator (`tflite_file.Op`), or None."""
    if op.name == "STABLEHLO_CUSTOM_CALL":
        return CUSTOM_TFLITE_OP, op.name, "calls a custom-call target outside TFLite"
    if op.custom is None:
        return None
    if op.flex is not None:
        tf_op = TF_OPS.get(op.flex)
        return (tf_op, op.custom, f"Flex op running TensorFlow's {tf_op.name}: {tf_op.why}") if tf_op else None
    if op.custom in TFLITE_RUNTIME_CUSTOM_OPS:
        return None
    return CUSTOM_TFLITE_OP, op.name, None


def scan(path: Path):
    """The ops of every subgraph whose operator code is in the unsafe table (`zoo.deploy.formats.unsafe`): one
    finding per subgraph and code, at its first operator."""
    try:
        model = TFLiteFile.read(path)
        findings, ops = [], model.ops()
        first: dict[tuple[int, int], tuple] = {}
        counts = collections.Counter()
        for op in ops:
            entry = _entry(op)
            if entry:
                key = (op.subgraph, op.opcode)
                counts[key] += 1
                first.setdefault(key, (op, entry))
        for key, (op, (entry, name, why)) in first.items():
            graph = model.subgraph_name(op.subgraph)
            where = f"subgraph {op.subgraph}" + (f" '{graph}'" if graph else "") + f", operator {op.index}"
            findings.append(Finding.of(entry, where, op=name, why=why, count=counts[key]))
    except NotTFLiteError:
        raise ArtifactError(f"{path} is not a TFLite flatbuffer (no {IDENTIFIER.decode()} identifier).") from None
    except (IndexError, ValueError, UnicodeDecodeError) as e:  # a truncated or corrupt flatbuffer
        raise ArtifactError(f"{path} is a corrupt TFLite flatbuffer: {type(e).__name__}: {e}") from None
    return findings, len(ops)
