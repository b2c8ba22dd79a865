"""SavedModel -> ONNX with tf2onnx, around three of its gaps and one of onnxruntime's, each met on a
keras.applications model.

1. Captured constants declared as graph inputs (every EfficientNet, ConvNeXt,
   any model with a `Normalization` layer). `tf2onnx.convert.from_function`
   (and `from_keras`, and so Keras's own `model.export(format="onnx")`) names
   the graph inputs `[t for t in concrete_func.inputs if t.dtype != resource]`
   (tf2onnx 1.17 `convert.py`). A concrete function's `inputs` include its
   captures, and `Normalization` holds its mean and variance as plain tensors
   (`finalize_state` turns the adapted variables into `ops.convert_to_tensor`
   values; given `mean=`/`variance=` are tensors from the start), captured by
   value. TensorFlow's freezing turns those captures into constants, yet
   tf2onnx still lists them as inputs, so onnxruntime refuses to run the model
   ("Required inputs ['.../normalization/Sub/y:0', '.../Sqrt/x:0'] are
   missing"). tf2onnx's SavedModel loader (`tf_loader._from_saved_model_v2`)
   drops captured inputs; this module converts from the SavedModel the export
   writes anyway, through that loader.
2. `Erfc`: exact GELU (`gelu(approximate=False)`, ConvNeXt, ViTs) lowers to
   `0.5 * x * erfc(-x / sqrt(2))` (`tf.nn.gelu`). ONNX has `Erf` but no `Erfc`
   and tf2onnx maps none. In the frozen GraphDef, each `Erfc(z)` becomes
   `1 - Erf(z)` under the same node name (`rewrite_erfc`). For very negative
   inputs `1 - erf` loses the tail that `erfc` keeps: |error| < 1e-7 * |x|.
3. Ops tf2onnx cannot map stay in the graph under their TensorFlow name, and
   onnxruntime fails to load the model with an "INVALID_GRAPH ... In Node"
   error about an op nobody wrote. Here they are an `UnsupportedOpsError` that
   names the op, the Keras layer and what to do (`zoo.deploy.formats.diagnose`).
4. onnxruntime folds a zero `Pad` into the `MaxPool` after it (`PadFusion`, a
   basic-level optimization since microsoft/onnxruntime#18136, on by default).
   A MaxPool's own padding never wins the max (-inf), a zero pad does: the
   fused pool returns the negative maximum of a border window where the model
   returns 0. Keras's `ZeroPadding2D` + `MaxPooling2D` on a signed input is
   ResNetV2's stem (conv1 has no activation), so its ONNX model disagreed with
   Keras by 0.03 on logits of 21 and flipped 2% of decisions, while running it
   with optimizations off agreed to 2e-5. The same bug in onnx-optimizer:
   onnxsim/onnxsim#290. `guard_zero_pads` gives each such Pad the value -0.0:
   numerically 0, but PadFusion only fuses a value whose bytes are all zero.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc

from zoo.deploy.formats.diagnose import OpGap, unknown_ops, unsupported_ops_error
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE

REWRITTEN = frozenset({"Erfc"})  # rewritten here before tf2onnx sees the graph


@dataclasses.dataclass(frozen=True)
class Rewrites:
    """What `convert_saved_model` changed beyond tf2onnx's own conversion (points 2 and 4 above)."""

    erfc: int = 0  # Erfc nodes rewritten as 1 - Erf
    zero_pads: int = 0  # zero Pads before a MaxPool given the value -0.0

    @property
    def notes(self) -> list[str]:
        return ([f"{self.erfc} Erfc (exact GELU) rewritten as 1 - Erf"] if self.erfc else []) + (
            [f"{self.zero_pads} zero Pad(s) before MaxPool kept out of onnxruntime's PadFusion (pad value -0.0)"]
            if self.zero_pads else [])


def rewrite_erfc(graph_def) -> int:
    """Rewrites every `Erfc(z)` node of the main graph of `graph_def` in place as `1 - Erf(z)`.

    The `Sub` keeps the `Erfc` node's name, so its consumers are untouched. Returns how many were
    rewritten. (An `Erfc` inside a control-flow body is left, and reported as unsupported.)
    """
    from tensorflow.core.framework import attr_value_pb2, node_def_pb2
    import tensorflow as tf

    def rewrite(nodes) -> list:
        out, count = [], 0
        for node in nodes:
            if node.op != "Erfc":
                out.append(node)
                continue
            dtype = node.attr["T"].type
            erf = node_def_pb2.NodeDef(name=f"{node.name}/zoo_erf", op="Erf", input=[node.input[0]], device=node.device)
            erf.attr["T"].CopyFrom(attr_value_pb2.AttrValue(type=dtype))
            one = node_def_pb2.NodeDef(name=f"{node.name}/zoo_one", op="Const", device=node.device)
            one.attr["dtype"].CopyFrom(attr_value_pb2.AttrValue(type=dtype))
            one.attr["value"].CopyFrom(attr_value_pb2.AttrValue(
                tensor=tf.make_tensor_proto(1.0, dtype=tf.dtypes.as_dtype(dtype))))
            sub = node_def_pb2.NodeDef(name=node.name, op="Sub", input=[one.name, erf.name], device=node.device)
            sub.attr["T"].CopyFrom(attr_value_pb2.AttrValue(type=dtype))
            out += [erf, one, sub]
            count += 1
        return out, count

    nodes, total = rewrite(graph_def.node)
    if total:
        del graph_def.node[:]
        graph_def.node.extend(nodes)
    return total


def convert_saved_model(saved_model_dir: str, opset: int, layers: dict[str, str] | None = None,
                        signature_key: str = SERVING_SIGNATURE):
    """(the ONNX `ModelProto` of a SavedModel signature, its `Rewrites`); inputs and outputs keep the
    signature's names.

    Raises `UnsupportedOpsError` when ops are left that ONNX cannot run (naming their layers from `layers`).
    """
    proto, rewrites, _ = convert_saved_model_external(saved_model_dir, opset, layers, signature_key, external=False)
    return proto, rewrites


def convert_saved_model_external(saved_model_dir: str, opset: int, layers: dict[str, str] | None = None,
                                 signature_key: str = SERVING_SIGNATURE, external: bool = True):
    """(proto, `Rewrites`, tensors) as `convert_saved_model`, on tf2onnx's large-model route where `external`:
    the frozen graph's large constants are taken out of the GraphDef before TensorFlow imports it
    (`tf_utils.compress_graph_def`) and handed to the converter as bytes, and every tensor over 1024 elements
    leaves the proto as external data (`graph.ExternalTensorStorage`; tf2onnx 1.17 `convert._convert_common`,
    the `--large_model` route). `tensors` maps each such tensor's `location` to its bytes (None inline):
    `zoo.deploy.formats.onnx.write_model` writes them beside the .onnx as one ONNX external-data file. It is the
    only route past protobuf's 2 GB limit on one message; below it, it is faster and no lighter (measured:
    `zoo.deploy.formats.memory_factors.json`, `results/export_memory/README.md`).
    """
    import tensorflow as tf
    from tf2onnx import optimizer, tf_loader
    from tf2onnx.graph import ExternalTensorStorage
    from tf2onnx.tf_utils import compress_graph_def
    from tf2onnx.tfonnx import process_tf_graph

    graph_def, inputs, outputs, tables, renames = tf_loader.from_saved_model(
        saved_model_dir, None, None, tag=["serve"], signatures=[signature_key], large_model=external,
        return_initialized_tables=True, return_tensors_to_rename=True)
    erfc = rewrite_erfc(graph_def)
    storage = ExternalTensorStorage() if external else None
    const_values = compress_graph_def(graph_def) if external else None
    gc.collect()  # the SavedModel tf2onnx loaded to freeze it (reference cycles): its variables are constants now
    with tf.device("/cpu:0"), tf.Graph().as_default() as tf_graph, _numpy_product():
        tf.import_graph_def(graph_def, name="")
        del graph_def  # its constants now live in const_values (external) or the imported graph
        graph = process_tf_graph(tf_graph, opset=opset, input_names=inputs, output_names=outputs,
                                 initialized_tables=tables, tensors_to_rename=renames, continue_on_error=False,
                                 const_node_values=const_values)
        del const_values
        graph = optimizer.optimize_graph(graph, catch_errors=not external)  # as tf2onnx's own large-model route
        proto = graph.make_model("zoo export", external_tensor_storage=storage)
        del graph
    zero_pads = guard_zero_pads(proto)
    unknown = unconverted_nodes(proto)
    if unknown:
        raise unsupported_ops_error(f"ONNX (tf2onnx, opset {opset})", unknown, layers or {})
    return proto, Rewrites(erfc=erfc, zero_pads=len(zero_pads)), None if storage is None else storage.name_to_tensor_data


@contextlib.contextmanager
def _numpy_product():
    """`numpy.product` while tf2onnx's large-model route runs: `Node.get_value_attr` (tf2onnx 1.17 graph.py)
    sizes each constant with it, and NumPy 2 removed it (NEP 52, numpy/numpy#24306) for `numpy.prod`."""
    import numpy as np

    if hasattr(np, "product"):
        yield
        return
    np.product = np.prod
    try:
        yield
    finally:
        del np.product


def unconverted_nodes(proto) -> dict[str, list[str]]:
    """op -> node names of the nodes (subgraphs too) that are no op of their ONNX domain: TF ops left behind."""
    import onnx

    found: dict[str, list[str]] = {}

    def walk(graph):
        for node in graph.node:
            if node.domain in ("", "ai.onnx", "ai.onnx.ml") and not onnx.defs.has(node.op_type, node.domain):
                found.setdefault(node.op_type, []).append(node.name)
            for attr in node.attribute:
                if attr.g.node:
                    walk(attr.g)
                for g in attr.graphs:
                    walk(g)

    walk(proto.graph)
    return found


def supported_tf_ops(opset: int) -> frozenset:
    """The TensorFlow ops tf2onnx converts at `opset`: its handler registry, stacked up to that opset
    (`tf2onnx.handler.tf_op.create_mapping`, what `process_tf_graph` maps with)."""
    import tf2onnx.custom_opsets  # noqa: F401  registers the handlers, as tf2onnx.tfonnx imports them
    import tf2onnx.onnx_opset  # noqa: F401
    from tf2onnx import handler

    return frozenset(handler.tf_op.create_mapping(opset, [])) | REWRITTEN


def unsupported_tf_ops(graph_def, opset: int) -> list[OpGap]:
    """The ops of a frozen TensorFlow graph that tf2onnx has no handler for at `opset`.

    A handler can still fail on a node's attributes (the conversion then says so); an op without one
    always fails, so this answers before a conversion for the case that matters most.
    """
    unknown = unknown_ops(graph_def, supported_tf_ops(opset))
    return [OpGap(op, tuple(nodes)) for op, nodes in sorted(unknown.items())]


POOLS_PADDING_WITH_MINUS_INF = ("MaxPool",)


def guard_zero_pads(proto) -> list[str]:
    """Gives every zero-valued constant `Pad` that feeds a `MaxPool` (directly or through a `Cast`) the
    pad value -0.0, so onnxruntime's PadFusion cannot fold it into the pool (point 4 above).

    Rewrites `proto` in place and returns the names of the Pad nodes changed. -0.0 == 0: the model
    computes the same; a Pad of a non-float tensor has no -0 and is left as it is.
    """
    import numpy as np
    import onnx
    from onnx import numpy_helper

    graph = proto.graph
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    constants = {i.name: i for i in graph.initializer}
    constants.update({n.output[0]: next(a.t for a in n.attribute if a.name == "value") for n in graph.node
                      if n.op_type == "Constant" and any(a.name == "value" for a in n.attribute)})

    def feeds_pool(name: str) -> bool:
        for node in consumers.get(name, ()):
            if node.op_type in POOLS_PADDING_WITH_MINUS_INF or (node.op_type == "Cast" and feeds_pool(node.output[0])):
                return True
        return False

    def is_zero_constant_pad(node) -> bool:
        modes = [a.s for a in node.attribute if a.name == "mode"]
        if modes and modes[0] != b"constant":
            return False
        value = node.input[2] if len(node.input) > 2 else ""
        return not value or (value in constants and not numpy_helper.to_array(constants[value]).any())

    pads = [n for n in graph.node if n.op_type == "Pad" and is_zero_constant_pad(n) and feeds_pool(n.output[0])]
    if not pads:
        return []
    types = _element_types(proto)
    changed = []
    for node in pads:
        elem_type = types.get(node.input[0])
        if elem_type is None or not np.issubdtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type), np.floating):
            continue
        name = f"{node.name}/zoo_minus_zero"
        graph.initializer.append(numpy_helper.from_array(
            np.array(-0.0, onnx.helper.tensor_dtype_to_np_dtype(elem_type)), name))
        inputs = list(node.input[:2]) + [name] + list(node.input[3:])
        del node.input[:]
        node.input.extend(inputs)
        changed.append(node.name)
    return changed


def _element_types(proto) -> dict[str, int]:
    """Tensor name -> ONNX element type, from the graph's declarations and ONNX shape inference."""
    import onnx

    graph = proto.graph
    declared = [*graph.input, *graph.output, *graph.value_info]
    types = {v.name: v.type.tensor_type.elem_type for v in declared if v.type.tensor_type.elem_type}
    types.update({i.name: i.data_type for i in graph.initializer})
    try:
        inferred = onnx.shape_inference.infer_shapes(proto).graph.value_info
    except (ValueError, onnx.shape_inference.InferenceError):  # over protobuf's 2 GB, or past inference: declared
        return types
    types.update({v.name: v.type.tensor_type.elem_type for v in inferred if v.type.tensor_type.elem_type})
    return types
