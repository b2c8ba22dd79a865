"""Gradient checkpointing (Chen et al. 2016, https://arxiv.org/abs/1604.06174) with `keras.remat`.

The functional graph is cut at tensors every later layer depends on through
that tensor alone (block outputs of a ResNet, say), the layers between cuts
are grouped into about sqrt(#cuts) segments, and each segment runs under
`keras.remat` (`tf.recompute_grad`, `jax.checkpoint`, `torch.utils.checkpoint`):
only segment boundaries are kept for the backward pass, and each segment's
activations are recomputed when its gradient is needed. On JAX a segment is
rematerialized as a pure function (`stateless_call`), its state updates
assigned after it: an assignment inside `jax.checkpoint` would leak its tracer.

Caveats: layers that update state in the forward pass run twice (batch-norm
moving statistics get two updates per step), and random layers (dropout)
must not be inside a recomputed segment, since the recomputation would draw
a different mask.
"""

from __future__ import annotations

import math

import keras

from zoo.core.train_step import TrainFeature


def _topological_nodes(model):
    depths = sorted(model._nodes_by_depth, reverse=True)
    return [node for d in depths for node in model._nodes_by_depth[d]]


def cut_points(model) -> list:
    """KerasTensors through which the whole rest of the graph flows, in order."""
    if not hasattr(model, "_nodes_by_depth") or len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ValueError(f"Gradient checkpointing needs a single-input, single-output functional model. Got {model.name!r}.")
    nodes = [n for n in _topological_nodes(model) if n.operation is not None and not isinstance(n.operation, keras.layers.InputLayer)]
    last_use = {}
    for i, node in enumerate(nodes):
        for t in node.input_tensors:
            last_use[id(t)] = i
    out_id = id(model.outputs[0])
    last_use[out_id] = len(nodes)
    cuts, live = [], {id(model.inputs[0])}
    for i, node in enumerate(nodes):
        live |= {id(t) for t in node.output_tensors}
        live = {t for t in live if last_use.get(t, -1) > i}
        if len(node.output_tensors) == 1 and live == {id(node.output_tensors[0])} and i < len(nodes) - 1:
            cuts.append(node.output_tensors[0])
    return cuts


def segment_models(model, segments: int | None = None) -> list[keras.Model]:
    """`model` as a chain of sub-models whose composition equals it."""
    cuts = cut_points(model)
    if not cuts:
        return [model]
    n = segments or max(1, round(math.sqrt(len(cuts) + 1)))
    n = min(n, len(cuts) + 1)
    chosen = [cuts[round((k + 1) * (len(cuts) + 1) / n) - 1] for k in range(n - 1)]
    bounds = [model.inputs[0], *dict.fromkeys(chosen), model.outputs[0]]  # dedupe, keep order
    return [keras.Model(a, b, name=f"{model.name}_segment{k}") for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]


class GradientCheckpointing(TrainFeature):
    name = "checkpointing"
    order = 30

    def __init__(self, segments: int | None = None):
        if segments is not None and (isinstance(segments, bool) or not isinstance(segments, int) or segments < 1):
            raise ValueError(f"segments must be a positive integer or None. Received: segments={segments!r}")
        self.segments = segments

    @classmethod
    def from_config(cls, config):
        return cls()

    def build(self, model):
        self._segments = segment_models(model, self.segments)

    def wrap_forward(self, model, forward):
        def checkpointed(x, training):
            for segment in self._segments:
                x = _rematerialized(segment, x, training)
            return x

        return checkpointed


def _rematerialized(segment, x, training):
    """`segment(x)`, its activations recomputed in the backward pass."""
    if keras.backend.backend() != "jax":
        return keras.remat(lambda t: segment(t, training=training))(x)

    def pure(trainable, non_trainable, t):
        return segment.stateless_call(trainable, non_trainable, t, training=training)

    y, updated = keras.remat(pure)([v.value for v in segment.trainable_variables],
                                   [v.value for v in segment.non_trainable_variables], x)
    for v, value in zip(segment.non_trainable_variables, updated):
        v.assign(value)
    return y
