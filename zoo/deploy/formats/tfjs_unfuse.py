"""Splits the TF.js converter's convolutions fused with a *tensor* "bias" back into ops tfjs's
wasm backend runs.

The tensorflowjs 4.22 converter fuses `Conv2D -> AddV2 -> Relu` into one
`_FusedConv2D` (fused_ops BiasAdd, Relu) even when the AddV2's other operand is
an activation, not a weight: a ResNet's projection shortcut plus the residual
branch (`conv2_block1_0_conv` + `conv2_block1_3_bn`). The cpu backend
broadcasts that rank-4 "bias"; the wasm backend refuses it ("FusedConv2D only
supports rank-1 bias but got rank 4"), so ResNet-50 would run only on the
cpu backend, tens of times slower. A real bias is always a weight in the
manifest; a node whose fused argument is not one is rewritten here as
`Conv2D -> AddV2 [-> activation]`, the last op keeping the node's name so its
consumers are untouched. Only `model.json` changes; the weights do not.

Hard swish (MobileNetV3). TensorFlow's oneDNN build (the default on x86) lets the
converter's grappler `remap` pass fuse `Conv2D -> BiasAdd -> x * relu6(x + 3) / 6`
into `_FusedConv2D` with fused_ops `[BiasAdd, _FusedHardSwish]`, an activation
no tfjs backend has ("_fusedhardswish activation not yet supported for
FusedConv2D in the wasm backend"; cpu: "not implemented"). It needs a bias: an
untrained network's BatchNormalization folds to none, a trained one's to one, so
MobileNetV3 converts fine until it is trained. `compose_hard_swish` keeps the
convolution fused with its bias and writes the activation out as Keras computes
it, `(x * 1/6) * relu6(x + 3)`, its two constants in one extra weights shard.
"""

from __future__ import annotations

import json
from pathlib import Path

_UNFUSED = {"_FusedConv2D": "Conv2D", "_FusedDepthwiseConv2dNative": "DepthwiseConv2dNative"}
_ACTIVATIONS = {"Relu", "Relu6", "Elu", "Sigmoid", "Tanh"}
_FUSION_ATTRS = {"fused_ops", "num_args", "epsilon", "leakyrelu_alpha", "num_host_args"}


def _fused_ops(node) -> list[str]:
    import base64

    return [base64.b64decode(s).decode() for s in node.get("attr", {}).get("fused_ops", {}).get("list", {}).get("s", [])]


def unfuse_tensor_bias(model_dir) -> int:
    """Rewrites `model_dir/model.json` in place; returns how many nodes were split."""
    path = Path(model_dir) / "model.json"
    model = json.loads(path.read_text())
    weights = {w["name"] for group in model.get("weightsManifest", []) for w in group["weights"]}
    nodes = model["modelTopology"]["node"]
    out, split = [], 0
    for node in nodes:
        ops = _fused_ops(node)
        args = node.get("input", [])[2:]
        tensor_bias = [a for a in args if not a.startswith("^") and a.split(":")[0] not in weights]
        if (node.get("op") not in _UNFUSED or not tensor_bias or len(args) != 1 or not ops or ops[0] != "BiasAdd"
                or len(ops) > 2 or (len(ops) == 2 and ops[1] not in _ACTIVATIONS)):
            out.append(node)
            continue
        name, dtype = node["name"], node["attr"].get("T", {"type": "DT_FLOAT"})
        attr = {k: v for k, v in node["attr"].items() if k not in _FUSION_ATTRS}
        conv = {"name": f"{name}/zoo_unfused_conv", "op": _UNFUSED[node["op"]], "input": node["input"][:2],
                "attr": attr}
        add = {"name": name if len(ops) == 1 else f"{name}/zoo_unfused_add", "op": "AddV2",
               "input": [conv["name"], args[0]], "attr": {"T": dtype}}
        out += [conv, add]
        if len(ops) == 2:
            out.append({"name": name, "op": ops[1], "input": [add["name"]], "attr": {"T": dtype}})
        split += 1
    if split:
        model["modelTopology"]["node"] = out
        path.write_text(json.dumps(model))
    return split


_COMPOSABLE = {"_FusedConv2D", "_FusedDepthwiseConv2dNative", "FusedDepthwiseConv2dNative", "_FusedMatMul"}
CONSTANTS_SHARD = "zoo-constants.bin"  # the weights the rewrites add, beside the converter's shards
_HARD_SWISH_CONSTANTS = {"zoo_hard_swish/three": 3.0, "zoo_hard_swish/one_sixth": 1.0 / 6.0}


def compose_hard_swish(model_dir) -> int:
    """Rewrites `model_dir/model.json` in place (and adds `CONSTANTS_SHARD`); returns how many fused
    hard swishes were written out as `(x * 1/6) * Relu6(x + 3)`."""
    import base64

    import numpy as np

    path = Path(model_dir) / "model.json"
    model = json.loads(path.read_text())
    out, composed = [], 0
    for node in model["modelTopology"]["node"]:
        ops = _fused_ops(node)
        if (node.get("op") not in _COMPOSABLE or not ops or ops[-1] != "_FusedHardSwish"
                or node["attr"].get("T", {}).get("type", "DT_FLOAT") != "DT_FLOAT"):
            out.append(node)
            continue
        name, dtype = node["name"], {"type": "DT_FLOAT"}
        fused = {**node, "name": f"{name}/zoo_unfused", "attr": {
            **node["attr"], "fused_ops": {"list": {"s": [base64.b64encode(o.encode()).decode() for o in ops[:-1]]}}}}
        out += [
            fused,
            {"name": f"{name}/zoo_add", "op": "AddV2", "input": [fused["name"], "zoo_hard_swish/three"],
             "attr": {"T": dtype}},
            {"name": f"{name}/zoo_relu6", "op": "Relu6", "input": [f"{name}/zoo_add"], "attr": {"T": dtype}},
            {"name": f"{name}/zoo_scaled", "op": "Mul", "input": [fused["name"], "zoo_hard_swish/one_sixth"],
             "attr": {"T": dtype}},
            {"name": name, "op": "Mul", "input": [f"{name}/zoo_scaled", f"{name}/zoo_relu6"], "attr": {"T": dtype}},
        ]
        composed += 1
    if not composed:
        return 0
    for const in _HARD_SWISH_CONSTANTS:
        out.append({"name": const, "op": "Const",
                    "attr": {"value": {"tensor": {"dtype": "DT_FLOAT", "tensorShape": {}}}, "dtype": dtype}})
    model["modelTopology"]["node"] = out
    model["weightsManifest"].append({"paths": [CONSTANTS_SHARD], "weights": [
        {"name": const, "shape": [], "dtype": "float32"} for const in _HARD_SWISH_CONSTANTS]})
    (Path(model_dir) / CONSTANTS_SHARD).write_bytes(np.array(list(_HARD_SWISH_CONSTANTS.values()), "<f4").tobytes())
    path.write_text(json.dumps(model))
    return composed
