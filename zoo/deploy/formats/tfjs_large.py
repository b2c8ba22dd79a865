"""A large model's TF.js conversion, with the weights kept out of the graph while it is optimized (issue 40).

The TF.js converter (tensorflowjs 4.22 `tf_saved_model_conversion_v2._convert_tf_saved_model`) peaks at about
19x a model's weight bytes (`memory_factors.json`; convnext_xlarge's 1.4 GB would need 28 GB). Measured phase by
phase on a 201 MB three-Dense model, above the process's 0.85 GB: the loaded SavedModel holds 1x; freezing
(`convert_variables_to_constants_v2`, which reads every variable, writes it into a GraphDef and imports that
back into a concrete function) peaks at 10x and leaves 6x resident; each of the two grappler runs
(`optimize_graph`, a MetaGraphDef copied, serialized, parsed, optimized and serialized back) peaks at 18x; the
weight writer stacks every weight into one buffer (1x more).

`convert` runs the same pieces without those copies: the variables are read once into numpy
(`_FunctionConverterDataInEager`, the freezer's own reader) and the SavedModel is let go; the graph is frozen
with a scalar standing in for each variable, which then becomes a Placeholder of the variable's dtype and shape,
so grappler and the converter's own passes (`optimize_graph`: constant folding, batch-norm folding, fusions)
work on the graph alone; the placeholders become weight constants again and the weights are written from the
numpy arrays, a group of at most `GROUP_BYTES` at a time. What constant folding would have done to a weight
(batch-norm folding into a convolution, a transposed kernel) stays in the graph as ops, so `convert` is taken
for large models only (`LARGE_BYTES`); export verification runs the graph in tfjs against Keras as for any
other. Models with lookup tables (a resource initializer) take the converter's own path.
"""

from __future__ import annotations

import gc
import os
import types

import numpy as np

LARGE_BYTES = 512 * 2**20  # weights from which `zoo.deploy.formats.tfjs` converts with `convert`
GROUP_BYTES = 256 * 2**20  # the weight writer stacks a group's weights in one buffer: groups of at most this


def convert(saved_model_dir, output_dir, *, signature_def: str, saved_model_tags: str, quantization_dtype_map=None,
            control_flow_v2: bool = False, weight_shard_size_bytes: int = 4 * 2**20) -> bool:
    """Converts as `convert_tf_saved_model(..., use_structured_outputs_names=True, skip_op_check=True)` does,
    holding each weight once (see the module docstring). False, with nothing written, for a model with lookup
    tables: convert it with the converter's own function."""
    import tensorflow as tf
    from tensorflow.python.framework import convert_to_constants

    from zoo.deploy.formats.tfjs_shim import convert_tf_saved_model

    convert_tf_saved_model()  # first: the converter's modules, importable without their unused dependencies
    from tensorflowjs.converters import common
    from tensorflowjs.converters import tf_saved_model_conversion_v2 as v2

    signature = v2._find_signature(saved_model_dir, saved_model_tags, signature_def)
    model = v2._load_model(saved_model_dir, saved_model_tags.split(","))
    if v2._get_resource_initializer_concrete_function(model) is not None:
        return False
    func = model.signatures[signature_def]
    if not isinstance(func.structured_outputs, dict):
        raise ValueError("the TF.js converter takes a serving function that returns a dict of outputs; this one "
                         f"returns {type(func.structured_outputs).__name__}")
    metadata = {common.STRUCTURED_OUTPUTS_KEYS_KEY: sorted(func.structured_outputs)}
    data = convert_to_constants._FunctionConverterDataInEager(
        func=func, lower_control_flow=not control_flow_v2, aggressive_inlining=True)
    weights = {}  # variable's node -> its value, read once
    for name, tensor in list(data.tensor_data.items()):
        weights[name] = np.asarray(tensor.numpy)
        data.tensor_data[name] = tensor._replace(numpy=np.zeros((), weights[name].dtype))
    inputs = [_spec(t) for t in func.inputs if t.name.split(":")[0] not in weights]  # captures are weights
    outputs = [_spec(t) for t in func.outputs]
    tf_version = model.tensorflow_version
    graph_def, _ = convert_to_constants._replace_variables_by_constants(converter_data=data)
    del model, func, data
    gc.collect()

    for node in graph_def.node:  # each variable's scalar stand-in -> a Placeholder of its dtype and shape
        if node.op == "Const" and node.name in weights:
            name, value = node.name, weights[node.name]
            node.Clear()
            node.name, node.op = name, "Placeholder"
            node.attr["dtype"].type = tf.as_dtype(value.dtype).as_datatype_enum
            node.attr["shape"].shape.CopyFrom(tf.TensorShape(value.shape).as_proto())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    del graph_def
    signature_def_ = v2._build_signature_def(graph, inputs, outputs, signature)
    optimized = v2.optimize_graph(graph, signature_def_, skip_op_check=True)
    del graph
    manifest = v2.extract_weights(optimized)[0]  # the constants the graph holds itself
    kept = []
    for node in optimized.node:  # the placeholders grappler kept become weight constants, their values apart
        if node.op == "Placeholder" and node.name in weights:
            node.op = "Const"
            shape = node.attr["shape"].shape
            tensor = node.attr["value"].tensor
            tensor.dtype = node.attr["dtype"].type
            tensor.tensor_shape.CopyFrom(shape)
            del node.attr["shape"]
            kept.append({"name": node.name, "data": weights[node.name]})
    os.makedirs(output_dir, exist_ok=True)
    v2.write_artifacts(v2.MessageToDict(optimized), _groups(manifest + kept), os.path.join(output_dir, "model.json"),
                       tf_version, signature_def_, quantization_dtype_map=quantization_dtype_map,
                       weight_shard_size_bytes=weight_shard_size_bytes, metadata=metadata)
    return True


def _spec(tensor):
    """What the converter's signature builder reads of a tensor, without holding its graph (and the variables)."""
    return types.SimpleNamespace(name=tensor.name, dtype=tensor.dtype, shape=tensor.shape)


def _groups(entries: list[dict]) -> list[list[dict]]:
    """The weight entries in groups of at most `GROUP_BYTES` (one entry larger than that is a group alone)."""
    groups, size = [[]], 0
    for entry in entries:
        n = np.asarray(entry["data"]).nbytes
        if groups[-1] and size + n > GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(entry)
        size += n
    return groups
