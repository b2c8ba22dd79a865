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
