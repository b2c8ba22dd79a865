"""Forward-pass FLOPs of a Keras model, counted analytically layer by layer.

One multiply-add is 2 FLOPs. Convolutions, depthwise convolutions, dense layers and the
matrix products of recurrent cells are counted exactly; bias adds, batch normalisation,
activations, residual adds and pooling are counted per element (they are a few per cent of a
CNN's total). Recurrent layers count every time step: TF's graph profiler
(`tf.compat.v1.profiler`) sees a `while` loop's body once and so undercounts an LSTM by the
number of steps, which is why this walks the Keras graph instead.

Reference numbers the tests check against:

- ResNet-50 at 224x224, laid out as keras.applications (stride in the first 1x1 of each
  stage, v1): 3.86 G multiply-adds in its convolutions and classifier, i.e. ~7.7 GFLOPs
  (He et al. 2016, https://arxiv.org/abs/1512.03385, Table 1: "3.8 x 10^9 FLOPs", which are
  multiply-adds). The often-quoted 4.1 GMACs / 8.2 GFLOPs is torchvision's v1.5 (stride in
  the 3x3), which costs more.
- MobileNetV2 1.0 at 224x224: 300 M multiply-adds (Sandler et al. 2018,
  https://arxiv.org/abs/1801.04381, Table 4).
"""

from __future__ import annotations

import math

import keras

# Per-element cost of an activation function (exp counted as 1, as profilers do).
_ACTIVATION_FLOPS = {"linear": 0, "relu": 1, "relu6": 2, "sigmoid": 4, "tanh": 5, "softmax": 5,
                     "gelu": 8, "swish": 5, "silu": 5, "elu": 3, "selu": 4, "softplus": 3,
                     "hard_sigmoid": 3, "leaky_relu": 2}


def _prod(shape) -> int:
    return int(math.prod(int(d) for d in shape))


def _activation_flops(activation) -> int:
    if activation is None:
        return 0
    name = getattr(activation, "__name__", None) or str(activation)
    return _ACTIVATION_FLOPS.get(name, 1)


def _shape(t):
    return tuple(t.shape)


def _conv(layer, x, y) -> int:
    kernel = _prod(layer.kernel_size)
    in_ch = x[-1] if layer.data_format == "channels_last" else x[1]
    groups = getattr(layer, "groups", 1) or 1
    macs = _prod(y[1:]) * kernel * in_ch // groups
    return 2 * macs + (_prod(y[1:]) if layer.use_bias else 0) + _prod(y[1:]) * _activation_flops(layer.activation)


def _depthwise(layer, x, y) -> int:
    macs = _prod(y[1:]) * _prod(layer.kernel_size)
    return 2 * macs + (_prod(y[1:]) if layer.use_bias else 0) + _prod(y[1:]) * _activation_flops(layer.activation)


def _separable(layer, x, y) -> int:
    in_ch = x[-1] if layer.data_format == "channels_last" else x[1]
    spatial = _prod(y[1:-1]) if layer.data_format == "channels_last" else _prod(y[2:])
    depthwise = spatial * in_ch * layer.depth_multiplier * _prod(layer.kernel_size)
    pointwise = spatial * in_ch * layer.depth_multiplier * layer.filters
    return 2 * (depthwise + pointwise) + (_prod(y[1:]) if layer.use_bias else 0)


def _dense(layer, x, y) -> int:
    rows = _prod(x[1:-1])
    out = _prod(y[1:])
    return 2 * rows * x[-1] * layer.units + (out if layer.use_bias else 0) + out * _activation_flops(layer.activation)


def _recurrent(layer, x, y) -> int:
    """All `T` steps of a SimpleRNN / GRU / LSTM: input and recurrent products, bias, gate maths."""
    cell = layer.cell
    steps = x[1]
    if steps is None:
        raise ValueError(f"{layer.name}: the number of time steps is unknown (None); pass input_shape.")
    features, units = x[-1], cell.units
    gates = {"LSTMCell": 4, "GRUCell": 3, "SimpleRNNCell": 1}.get(type(cell).__name__)
    if gates is None:
        raise ValueError(f"{layer.name}: cannot count the FLOPs of cell type {type(cell).__name__}.")
    matmul = 2 * (features + units) * gates * units
    bias = gates * units * (2 if getattr(cell, "reset_after", False) else 1) if cell.use_bias else 0
    # Gate maths per unit: LSTM 3 sigmoids, 2 tanh, 3 mul, 1 add; GRU 2 sigmoids, 1 tanh, 3 mul,
    # 2 add; SimpleRNN the activation.
    elementwise = {4: 3 * 4 + 2 * 5 + 4, 3: 2 * 4 + 5 + 5, 1: _activation_flops(cell.activation)}[gates] * units
    return int(steps) * (matmul + bias + elementwise)


def _batch_norm(layer, x, y) -> int:
    return 2 * _prod(y[1:])  # inference: scale and shift (folded into the conv by exporters)


def _layer_norm(layer, x, y) -> int:
    return 7 * _prod(y[1:])  # mean, variance, normalise, scale, shift


def _per_output(cost):
    return lambda layer, x, y: cost * _prod(y[1:])


def _activation_layer(layer, x, y) -> int:
    if isinstance(layer, keras.layers.ReLU):
        return (2 if layer.max_value is not None else 1) * _prod(y[1:])
    return _activation_flops(getattr(layer, "activation", None)) * _prod(y[1:])


def _pool(layer, x, y) -> int:
    return _prod(layer.pool_size) * _prod(y[1:])


def _global_pool(layer, x, y) -> int:
    return _prod(x[1:])


def _merge(layer, xs, y) -> int:
    return (len(xs) - 1) * _prod(y[1:])


_COUNTERS = [
    (keras.layers.SeparableConv2D, _separable),
    (keras.layers.SeparableConv1D, _separable),
    (keras.layers.DepthwiseConv2D, _depthwise),
    (keras.layers.DepthwiseConv1D, _depthwise),
    (keras.layers.Conv1D, _conv),
    (keras.layers.Conv2D, _conv),
    (keras.layers.Conv3D, _conv),
    (keras.layers.Dense, _dense),
    (keras.layers.LSTM, _recurrent),
    (keras.layers.GRU, _recurrent),
    (keras.layers.SimpleRNN, _recurrent),
    (keras.layers.BatchNormalization, _batch_norm),
    (keras.layers.LayerNormalization, _layer_norm),
    (keras.layers.ReLU, _activation_layer),
    (keras.layers.Activation, _activation_layer),
    (keras.layers.Softmax, _per_output(5)),
    (keras.layers.MaxPooling1D, _pool),
    (keras.layers.MaxPooling2D, _pool),
    (keras.layers.AveragePooling1D, _pool),
    (keras.layers.AveragePooling2D, _pool),
    (keras.layers.GlobalAveragePooling1D, _global_pool),
    (keras.layers.GlobalAveragePooling2D, _global_pool),
    (keras.layers.GlobalMaxPooling1D, _global_pool),
    (keras.layers.GlobalMaxPooling2D, _global_pool),
]
_MERGES = (keras.layers.Add, keras.layers.Subtract, keras.layers.Multiply, keras.layers.Average,
           keras.layers.Maximum, keras.layers.Minimum)
# Layers that move or drop data but do no arithmetic at inference.
_FREE = (keras.layers.InputLayer, keras.layers.Dropout, keras.layers.SpatialDropout1D,
         keras.layers.SpatialDropout2D, keras.layers.Flatten, keras.layers.Reshape, keras.layers.Permute,
         keras.layers.ZeroPadding1D, keras.layers.ZeroPadding2D, keras.layers.Cropping1D,
         keras.layers.Cropping2D, keras.layers.Embedding, keras.layers.Masking, keras.layers.Concatenate,
         keras.layers.Rescaling, keras.layers.GaussianNoise, keras.layers.RepeatVector,
         keras.layers.TimeDistributed)


def _count_layer(layer, inputs, output) -> int:
    if isinstance(layer, keras.layers.Bidirectional):
        return _count_layer(layer.forward_layer, inputs, output) + _count_layer(layer.backward_layer, inputs, output)
    if isinstance(layer, _MERGES):
        return _merge(layer, inputs, _shape(output))
    for cls, counter in _COUNTERS:
        if isinstance(layer, cls):
            return int(counter(layer, _shape(inputs[0]), _shape(output)))
    if isinstance(layer, keras.layers.Rescaling):
        return 2 * _prod(_shape(output)[1:])
    if isinstance(layer, _FREE) or not layer.weights:
        return 0  # reshapes and weightless ops (e.g. keras.ops in a functional graph) are ~free
    raise ValueError(
        f"forward_flops cannot count layer {layer.name!r} of type {type(layer).__name__}; "
        f"known types: {sorted({c.__name__ for c, _ in _COUNTERS} | {c.__name__ for c in _MERGES})}."
    )


def flops_by_layer(model, input_shape=None) -> list[tuple[str, int]]:
    """(layer name, FLOPs per sample) for every layer of `model`, nested models flattened.

    `input_shape` is one sample's shape (no batch axis); by default the model's input shape.
    """
    if input_shape is None:
        input_shape = tuple(model.inputs[0].shape[1:])
    input_shape = tuple(input_shape)
    if any(d is None for d in input_shape):
        raise ValueError(f"forward_flops needs a fully known input shape. Received: input_shape={input_shape}")
    rows: list[tuple[str, int]] = []
    _walk(model, [keras.KerasTensor((1, *input_shape), dtype=model.inputs[0].dtype)], rows, prefix="")
    return rows


def _walk(model, inputs, rows, prefix):
    """Propagates symbolic tensors through a functional model's graph, counting each node."""
    if not hasattr(model, "_nodes_by_depth"):
        raise ValueError(f"forward_flops needs a functional or Sequential model. Received: {type(model).__name__}")
    tensors = {id(ref): t for ref, t in zip(model.inputs, inputs)}
    for depth in sorted(model._nodes_by_depth, reverse=True):
        for node in model._nodes_by_depth[depth]:
            op = node.operation
            if op is None or node.is_input or any(id(t) not in tensors for t in node.input_tensors):
                continue
            args, kwargs = node.arguments.fill_in(tensors)
            layer_inputs = [tensors[id(t)] for t in node.input_tensors]
            if isinstance(op, keras.Model) and hasattr(op, "_nodes_by_depth"):
                outputs = _walk(op, layer_inputs, rows, prefix=f"{prefix}{op.name}/")
            else:
                kwargs.pop("training", None)
                kwargs.pop("mask", None)
                outputs = op.compute_output_spec(*args, **kwargs)
                first = keras.tree.flatten(outputs)[0]
                rows.append((prefix + op.name, _count_layer(op, layer_inputs, first)))
            for ref, value in zip(node.outputs, keras.tree.flatten(outputs)):
                tensors[id(ref)] = value
    return [tensors[id(t)] for t in model.outputs]


def forward_flops(model, input_shape=None) -> int:
    """FLOPs of one forward pass of one sample (multiply-add = 2 FLOPs).

    Args:
        model: a functional or Sequential Keras model (e.g. from `zoo.build`).
        input_shape: one sample's shape without the batch axis; the model's by default.

    Example:
        >>> forward_flops(zoo.build("resnet50")) / 1e9   # ~7.8 GFLOPs
    """
    return sum(f for _, f in flops_by_layer(model, input_shape))
