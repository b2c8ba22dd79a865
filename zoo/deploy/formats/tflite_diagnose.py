"""What TFLite's builtins cannot run: the ops, the Keras layers they came from, and the way out.

Both sources are the converter's: its refusal during an export ("'tf.LookupTableFindV2' op is neither
a custom op nor a flex op", `converter_gaps`), and, for `zoo export --check`, one conversion with Flex
and custom ops allowed whose non-builtin ops are read back from the flatbuffer (`unsupported_ops`).
`zoo.deploy.formats.diagnose` traces each op's graph node to its Keras layer and says what the user can
do; `flex_hint` names the explicit way to run the ops anyway (`allow_flex`), and `route_around` the
route export takes where the traced graph's only gaps are an RNN loop's.
"""

from __future__ import annotations

import re

import numpy as np

from zoo.deploy.formats.diagnose import TABLE_OPS, OpGap, UnsupportedOpsError, graph_nodes, unsupported_ops_error
from zoo.deploy.formats.tflite_file import TFLiteFile, flex_op

FLEX_NEEDS = "the Flex delegate (TF Select: allow_flex=True / --allow-flex, and the app links it)"
NO_BUILTIN = r"'tf\.(\w+)' op is neither a custom op nor a flex op"  # the converter's refusal of one op


def converter_gaps(message: str) -> dict[str, list[str]]:
    """op -> graph node names, from the converter's "op is neither a custom op nor a flex op" errors.

    The converter reports each as `loc(fused["LookupTableFindV2:", "model_1/lookup_1/None_Lookup/
    LookupTableFindV2@__inference_serve_123"]): error: 'tf.LookupTableFindV2' op is neither a custom op
    nor a flex op`. Ops that only the RNN routes remove (TensorList*) are not listed: those are routes' business.
    """
    found: dict[str, list[str]] = {}
    for line in message.splitlines():
        match = re.search(NO_BUILTIN, line)
        if not match or match.group(1).startswith("TensorList"):
            continue
        nodes = [n.split("@")[0] for n in re.findall(r'"([^"]+)"', line) if "/" in n]
        found.setdefault(match.group(1), []).extend(nodes or [""])
    return found


def flex_hint(error: Exception, options: dict) -> str:
    """Where ops lack a TFLite builtin: the ops, and the explicit way to run them anyway."""
    ops = sorted(set(re.findall(NO_BUILTIN, str(error))))
    ops = [op for op in ops if not op.startswith("TensorList")]  # the RNN routes' business
    if not ops or options.get("allow_flex"):
        return ""
    return (f" [ops without a TFLite builtin: {', '.join(ops)}; they would run only as Flex (TF Select) ops: pass "
            "allow_flex=True / --allow-flex to allow that]")


def refusal(error: Exception, options: dict, layers) -> UnsupportedOpsError | None:
    """The error naming the ops without a builtin, their layers (`layers`: the model's, name -> class) and the
    way out, where the converter's `error` refused such ops; None where it refused for another reason."""
    unsupported = converter_gaps(str(error))
    if not unsupported:
        return None
    named = unsupported_ops_error("TFLite (builtin ops)", unsupported, layers)
    return UnsupportedOpsError(f"{named}{flex_hint(error, options)}", named.ops)


def unsupported_ops(traced) -> list[OpGap]:
    """The ops without a TFLite builtin in the model's dynamic-batch graph, and which of them Flex could run.

    TFLite publishes no list of the TensorFlow ops its builtins cover (legalization happens in the
    converter's MLIR passes), so the converter is the only way to know: one conversion with Flex and
    custom ops allowed always completes and marks each op the builtins lack, as a `Flex<Op>` (runs with
    the Flex delegate) or a custom op (nothing in TFLite runs it). Its output tensors keep the graph's
    node names, so each op is traced back to its Keras layer.
    """
    import tensorflow as tf

    if any(op in TABLE_OPS for op, _ in graph_nodes(traced.graph_def)):
        # Lookup tables are resources, which the frozen-graph path turns into placeholders: the model's own
        # function through the SavedModel path, as export converts it.
        converter = tf.lite.TFLiteConverter.from_concrete_functions([traced.concrete_function], traced.model)
    else:
        # The frozen graph with its weights as one-value (splat) constants: the same ops, shapes and names,
        # without the megabytes the converter would copy and fold (results/layers/README.md), and no
        # SavedModel written and retraced.
        function, holder = _weightless(traced)
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function], holder)
        converter.experimental_lower_to_saved_model = False
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    converter.allow_custom_ops = True
    try:
        flatbuffer = converter.convert()
    except Exception as e:
        unsupported = converter_gaps(str(e))
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
