"""OpenVINO's int8: NNCF post-training quantization of an `openvino.Model`, and what the export reports of it.

- `quantize`: `nncf.quantize`, int8 weights per channel, int8 activations per tensor, with the preset and
  model type OpenVINO recommends for the graph and, except for transformers, global min/max activation
  ranges and full bias correction (`zoo.deploy.formats.ptq.nncf_presets`), calibrated on the calibration
  data; where that int8 keeps fewer than 99% of float's decisions on the test inputs, fast bias correction
  too, the better kept (`zoo.deploy.formats.ptq.fallback`). 7-bit weights unless `target_cpu="vnni"`
  (NNCF's overflow fix in every layer), so that x86 CPUs without VNNI compute what the verifying machine
  did. With `max_accuracy_drop` or `min_agreement`, NNCF's own accuracy-aware quantization
  (`nncf.quantize_with_accuracy_control`) reverts the most sensitive operations to float until the
  validation accuracy (or the agreement with the float IR's decisions) is within bound; the report names
  the Keras layers they came from (`layers_by_order`, `layer_of`).
- `wide_weights`: the layers of an int8 IR that x86 CPUs without VNNI may compute differently
  (`zoo.deploy.formats.ptq.x86_int8`).

`zoo.deploy.formats.openvino` calls it from its `convert`, after declining OpenVINO's telemetry, as
`zoo.deploy.formats.onnx` calls `onnx_static`. Its models compile for the CPU with
`INFERENCE_PRECISION_HINT=f32`, as the format's runner does.
"""

from __future__ import annotations

import os
import re

import numpy as np

from zoo.deploy.formats.jobs import CALIBRATION, TEST
from zoo.deploy.formats.options import INT8_GUARDS
from zoo.deploy.formats.ptq.nncf_presets import constant
from zoo.deploy.formats.runner import predict_in_chunks

DEVICE = "CPU"


def wide_weights(model) -> list[str]:
    """The layers of an int8 OpenVINO IR whose weights can saturate OpenVINO's CPU kernels on x86 CPUs without
    VNNI (`zoo.deploy.formats.ptq.x86_int8`): a Convolution, MatMul or grouped convolution reducing over channels whose
    int8 weights go beyond 7 bits (`SAFE_WEIGHT`), or that a FakeQuantize of more than 129 levels quantizes at run
    time (a quantization-aware model's). Depthwise convolutions reduce over no channel pairs (NNCF's overflow fix
    leaves them 8-bit too). Empty where every x86 CPU computes the same."""
    from zoo.deploy.formats.ptq.x86_int8 import SAFE_WEIGHT

    wide = []
    for op in model.get_ops():
        kind = op.get_type_name()
        if kind not in ("Convolution", "GroupConvolution", "MatMul") or op.get_input_size() < 2:
            continue
        if kind == "GroupConvolution" and op.get_input_partial_shape(1).is_static and \
                op.get_input_partial_shape(1).to_shape()[2] == 1:  # [groups, out, in per group, ...]: depthwise
            continue
        source = _weight_source(op.input_value(1).get_node())
        if source is None:
            continue
        if source.get_type_name() == "FakeQuantize":
            if source.get_levels() > 2 * SAFE_WEIGHT + 1:
                wide.append(op.get_friendly_name())
        elif int(np.abs(source.get_data().astype(np.int16)).max()) > SAFE_WEIGHT:
            wide.append(op.get_friendly_name())
    return wide


def _weight_source(node, depth: int = 5):
    """The int8 Constant (or the FakeQuantize of a constant) behind a layer's weight input, through the
    dequantization NNCF writes (Convert, Subtract, Multiply) and layout ops; None for a float weight."""
    import openvino as ov

    kind = node.get_type_name()
    if kind == "Constant":
        return node if node.get_element_type() == ov.Type.i8 else None
    if kind == "FakeQuantize":
        return node if constant(node.input_value(0).get_node()) else None
    if depth and kind in ("Convert", "Subtract", "Multiply", "Reshape", "Transpose", "Unsqueeze"):
        return _weight_source(node.input_value(0).get_node(), depth - 1)
    return None


def dataset(x):
    """NNCF's calibration items, one example each: arrays (one input) or dicts by input name (several)."""
    import nncf

    if isinstance(x, dict):
        n = len(next(iter(x.values())))
        return nncf.Dataset([{k: feed(v[i : i + 1]) for k, v in x.items()} for i in range(n)])
    return nncf.Dataset([feed(x[i : i + 1]) for i in range(len(x))])


def feed(a) -> np.ndarray:
    """An input as OpenVINO and NNCF take it: float arrays as float32, others as they are."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.kind == "f" else a


def quantize(conversion, model, open_runner):
    """(int8 model, details): NNCF post-training quantization of `model` (an `openvino.Model`), within the accuracy
    budget where one is set; `open_runner(path)` opens a saved IR in the format's runtime (the budget's costs)."""
    import nncf
    import openvino as ov

    from zoo.deploy.formats.ptq.nncf_presets import recommended

    options = conversion.target.options
    n = options.get("calibration_samples") or 200
    named = {k: np.asarray(v[:n]) for k, v in conversion.numeric_inputs(CALIBRATION).items()}
    settings = recommended(model, options["target_cpu"])
    if not any(options.get(g) is not None for g in INT8_GUARDS):
        return _quantize_kept(conversion, model, named, settings, ov)
    from zoo.deploy.formats.ptq.budget import Goal, validation, wilson_interval
    from zoo.deploy.formats.ptq.budget import summary as budget_summary

    goal = Goal.of(options)
    rep = np.asarray(conversion.single_input(CALIBRATION)[:n], np.float32)  # the guards take single-input models
    x, y = validation(conversion, goal)
    x = np.asarray(x, np.float32)
    core = ov.Core()
    compile_ = lambda m: core.compile_model(m, DEVICE, {"INFERENCE_PRECISION_HINT": "f32"})  # noqa: E731

    def predict(compiled):
        return _first_output(compiled, {"x": x})

    # Agreement is with the float IR's decisions; accuracy with the labels.
    reference = predict(compile_(model)).argmax(-1) if goal.metric == "agreement" else y

    def metric(compiled, _data) -> float:
        return float(np.mean(predict(compiled).argmax(-1) == reference))

    def guarded(compiled, _data) -> float:  # agreement: its 95% lower bound (zoo.deploy.formats.ptq.budget)
        share = metric(compiled, _data)
        return wilson_interval(share, len(x))[0] if goal.metric == "agreement" else share

    # NNCF measures the float model's own value first: for agreement, the lower bound of full agreement.
    allowed = (wilson_interval(1.0, len(x))[0] - (1 - goal.max_drop / 100) if goal.metric == "agreement"
               else goal.max_drop / 100)
    full = nncf.quantize(model, dataset(rep), subset_size=len(rep), **settings.kwargs())
    quantized = nncf.quantize_with_accuracy_control(
        model, dataset(rep), dataset(x[:1]), guarded, max_drop=allowed, drop_type=nncf.DropType.ABSOLUTE,
        subset_size=len(rep), **settings.kwargs(accuracy_control=True),
    )
    metrics = {name: metric(compile_(m), None) for name, m in (("float32", model), ("int8", full),
                                                               ("chosen", quantized))}
    in_full, in_chosen = quantized_ops(full), quantized_ops(quantized)
    reverted = sorted(set(in_full) - set(in_chosen))
    keras_model = conversion.keras_model()
    by_order = layers_by_order(full, keras_model)
    layers = sorted({by_order.get(op) or layer_of(in_full[op], keras_model) for op in reverted})
    drop = 100 * (metrics["float32"] - metrics["chosen"])
    within = (wilson_interval(metrics["chosen"], len(x))[0] >= 1 - goal.max_drop / 100 - 1e-9
              if goal.metric == "agreement" else drop <= goal.max_drop + 1e-9)
    summary = budget_summary(goal.metric, goal.max_drop, metrics["float32"], metrics["int8"], metrics["chosen"], layers,
                             len(x))
    costs = _costs(conversion, {"float32": model, "int8": full, "chosen": quantized}, x[:1], ov, open_runner)
    details = {**costs, "metric": goal.metric, "budget_points": goal.max_drop, "float_metric": metrics["float32"],
               "full_int8_drop": 100 * (metrics["float32"] - metrics["int8"]), "final_drop": drop,
               "within_budget": within, "float_layers": layers, "float_ops": reverted,
               "validation_samples": int(len(x)), "summary": summary,
               "note": f"{goal.describe()} (nncf.quantize_with_accuracy_control): {summary}"}
    if goal.metric == "agreement":
        details.update(min_agreement=100 - goal.max_drop, full_int8_agreement=metrics["int8"],
                       final_agreement=metrics["chosen"],
                       final_agreement_interval=wilson_interval(metrics["chosen"], len(x)))
    return quantized, details


_BIAS_CORRECTION = {False: "full bias correction", True: "fast bias correction"}  # by `fast_bias_correction`


def _quantize_kept(conversion, model, named: dict, settings, ov):
    """(int8 model, details): `nncf.quantize` with `settings`, and where its int8 keeps fewer than
    `fallback.BELOW` of float's decisions on the test inputs, with fast bias correction too, keeping the one
    that keeps more (`fallback.keep_better`; a tie keeps the first). Full bias correction kept more decisions
    than fast on the compatibility matrix's MobileNets and far fewer on its VGG19, trained for one epoch
    (results/compat/int8_schemes_openvino.md, results/compat/vgg19_openvino_bias_correction.json)."""
    import dataclasses

    import nncf

    from zoo.deploy.formats.ptq.fallback import keep_better

    data = named if len(named) > 1 else next(iter(named.values()))
    count = len(next(iter(named.values())))

    def option(s):
        return _BIAS_CORRECTION[s.fast_bias_correction], lambda: nncf.quantize(model, dataset(data), subset_size=count,
                                                                               **s.kwargs())

    check = conversion.numeric_inputs(TEST)
    check, role = (named, "calibration") if check is None else (check, "test")
    n = len(next(iter(check.values())))
    float_out = None

    def agreement(quantized):
        nonlocal float_out
        if float_out is None:
            float_out = _outputs(ov, model, check)
        if float_out.ndim < 2 or float_out.shape[-1] < 2:
            return None
        out = _outputs(ov, quantized, check)
        return (float(np.mean(out.argmax(-1) == float_out.argmax(-1))), float(np.mean(np.abs(out - float_out))))

    fast = dataclasses.replace(settings, fast_bias_correction=True)
    quantized, kept, choice = keep_better(option(settings), None if settings == fast else option(fast), agreement,
                                          f"{n} {role}", tie_keeps_fallback=False)
    used = fast if kept == _BIAS_CORRECTION[True] else settings
    note = (f"NNCF post-training int8 ({used.describe()}), calibrated on {count} examples, "
            f"target CPU {conversion.target.options['target_cpu']}")
    return quantized, {"note": note if choice == kept else f"{note}; {choice}"}


def _outputs(ov, model, x: dict) -> np.ndarray:
    """The first output of `model` (an `openvino.Model`) on the named inputs `x`, in float32 arithmetic."""
    return _first_output(ov.Core().compile_model(model, DEVICE, {"INFERENCE_PRECISION_HINT": "f32"}), x)


def _first_output(compiled, x: dict) -> np.ndarray:
    """The first output of a compiled model on the named inputs `x`, in chunks of 256."""
    output = compiled.outputs[0]

    def run(batch: dict) -> dict:  # one input by position: the IR may name it differently from the signature
        inputs = {k: feed(v) for k, v in batch.items()}
        return {"first": compiled(next(iter(inputs.values())) if len(inputs) == 1 else inputs)[output]}

    return predict_in_chunks(run, x, 256)["first"]


def _costs(conversion, models: dict, x1: np.ndarray, ov, open_runner) -> dict:
    """Size on disk and median batch-1 latency of each IR (float32, full int8, the budget's choice)."""
    import statistics

    sizes, latency = {}, {}
    for name, model in models.items():
        folder = os.path.join(conversion.work_dir, f"openvino_budget_{name}_{os.getpid()}")
        os.makedirs(folder, exist_ok=True)
        xml = os.path.join(folder, f"{name}.xml")  # and its .bin beside it
        ov.save_model(model, xml, compress_to_fp16=False)
        sizes[name] = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
        latency[name] = statistics.median(open_runner(xml).latencies_ms(x1, 50, 5))
    return {"size_bytes": sizes, "latency_ms": latency}


WEIGHTED_OPS = ("Convolution", "GroupConvolution", "MatMul")


def layers_by_order(model, keras_model) -> dict[str, str]:
    """Each weighted op of `model` (an `openvino.Model`) -> its Keras layer's name, where the k-th weighted op in
    the IR's topological order is the k-th weighted Keras layer (`budget.WEIGHTED`, nested models' in place) and
    every pair's weights have the shape the op's layout gives the layer's kernel; else {} (`layer_of` goes by
    names instead; ResNet50's shortcut convolutions, for one, come in another order).

    The names cannot be relied on: OpenVINO's TF frontend moves NHWC convolutions between transposes, and the
    convolutions come out named `Transpose_N` or `Convolution_N`, as do their neighbours in deep graphs."""
    from zoo.deploy.formats.ptq.budget import WEIGHTED

    ops = [op for op in model.get_ordered_ops() if op.get_type_name() in WEIGHTED_OPS]
    layers = [layer for layer in keras_model._flatten_layers(include_self=False) if type(layer).__name__ in WEIGHTED]
    if len(ops) != len(layers):
        return {}
    found = {}
    for op, layer in zip(ops, layers):
        weights, kernel = op.input_value(1).get_partial_shape(), getattr(layer, "kernel", None)
        if kernel is None or weights.is_dynamic or [int(d) for d in weights.to_shape()] not in _ov_weights(
                op.get_type_name(), [int(d) for d in kernel.shape]):
            return {}
        found[op.get_friendly_name()] = layer.name
    return found


def _ov_weights(op_type: str, kernel: list[int]) -> list[list[int]]:
    """The weight shapes an op of `op_type` holds for a Keras kernel of shape `kernel` (spatial..., in, out)."""
    *spatial, c_in, c_out = kernel
    if op_type == "Convolution":  # [out, in, spatial...]
        return [[c_out, c_in, *spatial]]
    if op_type == "GroupConvolution":  # depthwise: [groups = in, multiplier, 1, spatial...]
        return [[c_in, c_out, 1, *spatial]]
    return [[c_in, c_out], [c_out, c_in]]  # MatMul, either orientation


def quantized_ops(model) -> dict[str, list[str]]:
    """The weighted ops (convolutions, matmuls) that take a FakeQuantize'd input: friendly name -> the names of
    the op and of the nodes feeding it (a few hops up), which carry the TF name scope of its Keras layer."""
    found = {}
    for op in model.get_ordered_ops():
        if op.get_type_name() not in WEIGHTED_OPS:
            continue
        inputs = [op.input_value(i).get_node() for i in range(op.get_input_size())]
        if any(_reaches_fake_quantize(node) for node in inputs):
            found[op.get_friendly_name()] = [op.get_friendly_name(), *_upstream_names(inputs), *_downstream_names(op)]
    return found


def _downstream_names(op, depth: int = 3) -> list[str]:
    """Names of the nodes after `op`: convert_model folds BatchNorm into a convolution and names it
    `Convolution_N`, but the ReLU after it keeps its TF name scope."""
    names = []
    for target in op.output(0).get_target_inputs() if op.get_output_size() else ():
        node = target.get_node()
        names.append(node.get_friendly_name())
        if depth:
            names += _downstream_names(node, depth - 1)
    return names


def _upstream_names(nodes, depth: int = 3) -> list[str]:
    names = []
    for node in nodes:
        names.append(node.get_friendly_name())
        if depth and node.get_type_name() != "Parameter":
            names += _upstream_names([node.input_value(i).get_node() for i in range(node.get_input_size())], depth - 1)
    return names


def _reaches_fake_quantize(node, depth: int = 3) -> bool:
    if node.get_type_name() == "FakeQuantize":
        return True
    if depth == 0 or node.get_type_name() in ("Parameter", *WEIGHTED_OPS):
        return False
    return any(_reaches_fake_quantize(node.input_value(i).get_node(), depth - 1) for i in range(node.get_input_size()))


def layer_of(names: list[str], model) -> str:
    """The Keras layer with weights an OpenVINO op came from, else the op's name.

    `names` are the op's and its neighbours' (see `quantized_ops`); the first in a Keras layer's name
    scope gives a layer, and the weighted layer at or before it in the Keras graph is the op's.
    """
    from zoo.deploy.formats.ptq.budget import WEIGHTED

    for name in names:
        for layer in model.layers:
            if re.search(rf"(^|/){re.escape(layer.name)}(_\d+)?/", name):
                found = _weighted_at_or_before(layer, WEIGHTED)
                if found is not None:
                    return found.name
    return names[0]


def _weighted_at_or_before(layer, kinds):
    """`layer` if it has int8-quantizable weights, else the nearest such layer upstream (first input first)."""
    seen, queue = set(), [layer]
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if type(current).__name__ in kinds:
            return current
        for node in current._inbound_nodes:
            queue += [t._keras_history.operation for t in node.input_tensors]
    return None

