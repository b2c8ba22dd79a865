"""`quantize_model`: a float functional model rewritten for quantization-aware training.

Keras 3 has no quantization-aware training (tensorflow-model-optimization supports Keras 2
only: https://github.com/tensorflow/model-optimization/issues/1119). This is the rewrite
tfmot's `quantize_model` does, for the layers of this zoo, placed where the TFLite
converter puts int8 tensors, so that the trained model converts with the ranges it
learned and computes what it computed in training:

- every Conv/Dense becomes a `QuantizedLinear`, with the BatchNormalization that follows it
  (and only it) folded in, as the converter folds it;
- an `ActivationQuantizer` follows the model input and every op that writes a new int8
  tensor (a conv, an add, a mean, ...) -- after the ReLU/ReLU6 that follows it, where there
  is one, because the converter fuses that activation into the op;
- ops that keep their input's scale in int8 (max pooling, padding, reshapes, dropout) get
  no quantizer; a final softmax neither: int8 softmax has the fixed output scale 1/256.

The weights of the float model are copied, so `quantize_model(trained)` fine-tunes it.
"""

from __future__ import annotations

import collections

import keras
import numpy as np

from zoo.core.model import ZooModel
from zoo.errors import ZooError
from zoo.quantization.layers import LINEAR_LAYERS, ActivationQuantizer, QuantizedLinear

# Layers whose int8 output has the input's scale and zero point: no quantizer after them.
SAME_SCALE = {
    "MaxPooling1D", "MaxPooling2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "ZeroPadding1D", "ZeroPadding2D",
    "Cropping1D", "Cropping2D", "Flatten", "Reshape", "Permute", "Dropout", "SpatialDropout1D", "SpatialDropout2D",
    "GaussianDropout", "GaussianNoise", "Identity", "ZeroPadShortcut", "UpSampling2D",
}
# Weightless ops that write a new int8 tensor with its own range: a quantizer after them.
NEW_RANGE = {
    "Add", "Subtract", "Multiply", "Average", "Concatenate", "GlobalAveragePooling1D", "GlobalAveragePooling2D",
    "AveragePooling1D", "AveragePooling2D", "BatchNormalization", "LayerNormalization", "Rescaling",
}
FUSED_ACTIVATIONS = ("relu", "relu6")


class QuantizationError(ZooError, ValueError):
    """A model (or a layer in it) that `quantize_model` cannot rewrite."""


def activation_name(layer) -> str | None:
    """'relu', 'relu6', 'softmax', 'linear', ... for Activation/ReLU/Softmax layers; None for other layers."""
    kind = type(layer).__name__
    if kind == "Activation":
        fn = layer.activation
        return getattr(fn, "__name__", str(fn))
    if kind == "ReLU":
        plain = not layer.negative_slope and not layer.threshold
        if plain and layer.max_value is None:
            return "relu"
        if plain and float(layer.max_value) == 6.0:
            return "relu6"
        return "relu_variant"
    if kind == "Softmax":
        return "softmax"
    return None


def is_quantized(model) -> bool:
    """Whether `model` was rewritten by `quantize_model` (has fake quantizers)."""
    return any(isinstance(layer, (ActivationQuantizer, QuantizedLinear)) for layer in model.layers)


def quantize_model(model: keras.Model, ema_decay: float = 0.99) -> keras.Model:
    """The quantization-aware copy of a functional `model`, its float weights copied; see the module docstring.

    Raises `QuantizationError` naming the layer for what cannot be rewritten: subclassed
    models, shared layers, non-float inputs, and layers with weights other than Conv/Dense/
    BatchNormalization (e.g. an LSTM or an Embedding).
    """
    if is_quantized(model):
        raise QuantizationError(f"Model {model.name!r} is already quantization-aware.")
    if not hasattr(model, "_nodes_by_depth") or not getattr(model, "_is_graph_network", True):
        raise QuantizationError(f"quantize_model needs a functional model. Received: {type(model).__name__}")
    plan = _Plan(model)
    new_inputs = [keras.Input(batch_shape=t.shape, dtype=t.dtype, name=t._keras_history.operation.name)
                  for t in model.inputs]
    for t in model.inputs:
        if not str(t.dtype).startswith("float"):
            raise QuantizationError(f"Input {t.name!r} has dtype {t.dtype}; int8 models quantize float inputs only.")
    quantized_inputs = [ActivationQuantizer(ema_decay, name=f"{t.name}_quant")(t) for t in new_inputs]
    rebuilt: dict[str, keras.layers.Layer] = {}

    def operation_fn(layer):
        def call(*args, **kwargs):
            role = plan.roles[layer.name]
            if role == "folded":
                return args[0]
            if layer.name not in rebuilt:
                rebuilt[layer.name] = plan.rebuild(layer)
            out = rebuilt[layer.name](*args, **kwargs)
            if layer.name in plan.quantize_after:
                out = ActivationQuantizer(ema_decay, name=f"{layer.name}_quant")(out)
            return out

        return call

    outputs = model._run_through_graph(quantized_inputs, operation_fn=operation_fn)
    qat = ZooModel(new_inputs, outputs, name=model.name)
    for name, new in rebuilt.items():
        old = model.get_layer(name)
        if isinstance(new, QuantizedLinear):
            new.inner.set_weights(old.get_weights())
            if new.batch_norm is not None:
                new.batch_norm.set_weights(plan.folded_into[name].get_weights())
        else:
            new.set_weights(old.get_weights())
    return qat


class _Plan:
    """What happens to each layer: rebuilt as is, as `QuantizedLinear`, or folded away; where quantizers go."""

    def __init__(self, model):
        self.model = model
        # Inputs first: `_nodes_by_depth` counts depth from the outputs.
        nodes = [n for depth in sorted(model._nodes_by_depth, reverse=True) for n in model._nodes_by_depth[depth]
                 if n.operation and not n.is_input]
        calls = collections.Counter(n.operation.name for n in nodes)
        shared = sorted(name for name, c in calls.items() if c > 1)
        if shared:
            raise QuantizationError(f"quantize_model does not support shared layers; {shared[0]!r} is called "
                                    f"{calls[shared[0]]} times.")
        consumers: dict[int, list] = collections.defaultdict(list)
        for n in nodes:
            for t in n.input_tensors:
                consumers[id(t)].append(n.operation)
        model_outputs = {id(t) for t in model.outputs}

        def only_consumer(layer):
            node = next(n for n in nodes if n.operation is layer)
            outs = node.outputs
            if len(outs) != 1 or id(outs[0]) in model_outputs:
                return None
            users = consumers.get(id(outs[0]), [])
            return users[0] if len(users) == 1 else None

        self.roles: dict[str, str] = {}
        self.folded_into: dict[str, keras.layers.Layer] = {}  # linear layer name -> its BatchNormalization
        self.quantize_after: set[str] = set()
        for n in nodes:
            layer = n.operation
            kind = type(layer).__name__
            if self.roles.get(layer.name) == "folded":
                continue
            if kind in LINEAR_LAYERS:
                self.roles[layer.name] = "linear"
                bn = only_consumer(layer)
                if bn is not None and type(bn).__name__ == "BatchNormalization":
                    self.folded_into[layer.name] = bn
                    self.roles[bn.name] = "folded"
                writes = layer
            else:
                self._check_supported(layer)
                self.roles[layer.name] = "copy"
                act = activation_name(layer)
                if kind in SAME_SCALE or act in ("linear", "softmax"):
                    continue
                writes = layer  # NEW_RANGE, activations and anything unknown get their own range
            # The quantizer goes after the output the converter writes: past a fused ReLU/ReLU6.
            tail = self.folded_into.get(writes.name, writes)
            follower = only_consumer(tail)
            if activation_name(writes) is None and follower is not None and activation_name(follower) in FUSED_ACTIVATIONS:
                continue  # the activation layer gets the quantizer
            self.quantize_after.add(writes.name)

    def _check_supported(self, layer):
        kind = type(layer).__name__
        if kind in SAME_SCALE or kind in NEW_RANGE or activation_name(layer) is not None:
            if activation_name(layer) == "relu_variant":
                raise QuantizationError(f"Layer {layer.name!r}: only ReLU and ReLU6 are fused by the int8 converter; "
                                        "leaky or thresholded ReLU is not supported by quantize_model.")
            return
        if layer.weights:
            raise QuantizationError(
                f"Layer {layer.name!r} ({kind}) has weights and quantize_model supports only "
                f"{', '.join(LINEAR_LAYERS)} and BatchNormalization; quantization-aware training of {kind} is not "
                "implemented (export it with post-training quantization instead)."
            )

    def rebuild(self, layer):
        if self.roles[layer.name] == "linear":
            bn = self.folded_into.get(layer.name)
            return QuantizedLinear(keras.layers.serialize(layer), keras.layers.serialize(bn) if bn else None,
                                   name=layer.name)
        return type(layer).from_config(layer.get_config())


def calibrate(model: keras.Model, batches, steps: int | None = None) -> int:
    """Sets every `ActivationQuantizer`'s range to the min/max of its input over `batches` (no training).

    `batches`: arrays or a tf.data of x or (x, y). Returns the number of examples seen.
    """
    quantizers = [layer for layer in model.layers if isinstance(layer, ActivationQuantizer)]
    if not quantizers:
        raise QuantizationError(f"Model {model.name!r} has no activation quantizers; quantize_model it first.")
    for q in quantizers:
        q.initialized.assign(0.0)
        q.observing = True
    seen = 0
    try:
        for i, batch in enumerate([batches] if isinstance(batches, np.ndarray) else batches):
            if steps is not None and i >= steps:
                break
            x = batch[0] if isinstance(batch, (tuple, list)) else batch
            model(x, training=False)
            seen += int(len(x))
    finally:
        for q in quantizers:
            q.observing = False
    return seen
