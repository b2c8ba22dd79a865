"""The ops of a converted TF.js graph model: the one tfjs lacks but can compose (`Erfc`), and the
check of every op against what tfjs runs, naming the Keras layer of each that it cannot.

Exact GELU (`gelu(approximate=False)`: ConvNeXt, ViTs) lowers to
`0.5 * x * erfc(-x / sqrt(2))` (`tf.nn.gelu`). tfjs 4.22 has `Erf` but no
`Erfc`, and the converter rejects the whole model ("Unsupported Ops in the
model before optimization: Erfc"). So the converter runs with its op check
off, each `Erfc(z)` in `model.json` becomes `Sub(OnesLike(z), Erf(z))` under
the same name (no new weight: `OnesLike` makes the constant), and the op
check runs here instead, against the converter's own op lists
(`tensorflowjs/op_list/*.json`), with an error that names the layer.
For very negative inputs `1 - erf` loses the tail that `erfc` keeps:
|error| < 1e-7 * |x|, far inside the float32 criterion.

Lookup tables (`StringLookup`, `IntegerLookup`): tfjs 4.22's `HashTable.find`
returns the looked-up values stacked into one flat vector, whatever the shape
of the keys (tfjs-converter `executor/hash_table.js`), so a `(batch, 3)` string
input comes out as `(batch * 3,)` ids and the next reshape fails ("Size(384)
must match the product of shape 96,12"). Each `LookupTableFindV2` is followed
by a `Reshape` to the keys' shape (`reshape_lookups`), as TensorFlow returns it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from zoo.deploy.formats.diagnose import OpGap, unknown_ops, unsupported_ops_error
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE

# Ops the converter adds itself or that tfjs resolves without a kernel of that name.
_ALWAYS = frozenset({"Placeholder", "Const", "Identity", "NoOp", "_FusedConv2D", "_FusedMatMul",
                     "FusedDepthwiseConv2dNative", "Prelu"})


REWRITTEN = frozenset({"Erfc", "StatefulPartitionedCall", "PartitionedCall"})  # rewritten here / inlined by freezing


@functools.lru_cache(maxsize=1)
def supported_ops() -> frozenset:
    """The TensorFlow op names tfjs runs, from the converter's op lists (found without importing
    tensorflowjs, whose import needs `zoo.deploy.formats.tfjs_shim` and loads the converter)."""
    import importlib.util

    spec = importlib.util.find_spec("tensorflowjs")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("TF.js's op lists come with tensorflowjs, which is not installed.")
    names = set(_ALWAYS)
    for path in (Path(next(iter(spec.submodule_search_locations))) / "op_list").glob("*.json"):
        names.update(entry["tfOpName"] for entry in json.loads(path.read_text()))
    return frozenset(names)


def _all_nodes(model: dict) -> list:
    topology = model["modelTopology"]
    nodes = list(topology.get("node", []))
    for func in topology.get("library", {}).get("function", []):
        nodes += func.get("nodeDef", [])
    return nodes


def rewrite_erfc(model_dir) -> int:
    """Rewrites `model_dir/model.json` in place; returns how many `Erfc` nodes became `1 - Erf`."""
    path = Path(model_dir) / "model.json"
    model = json.loads(path.read_text())
    nodes = model["modelTopology"].get("node", [])
    out, count = [], 0
    for node in nodes:
        if node.get("op") != "Erfc":
            out.append(node)
            continue
        name, (z, *control) = node["name"], node["input"]
        attr = {"T": node.get("attr", {}).get("T", {"type": "DT_FLOAT"})}
        out += [
            {"name": f"{name}/zoo_ones", "op": "OnesLike", "input": [z], "attr": dict(attr)},
            {"name": f"{name}/zoo_erf", "op": "Erf", "input": [z], "attr": dict(attr)},
            {"name": name, "op": "Sub", "input": [f"{name}/zoo_ones", f"{name}/zoo_erf", *control], "attr": attr},
        ]
        count += 1
    if count:
        model["modelTopology"]["node"] = out
        path.write_text(json.dumps(model))
    return count


def reshape_lookups(model_dir) -> int:
    """Rewrites `model_dir/model.json`: every `LookupTableFindV2` output reshaped to its keys' shape.

    The lookup keeps working under `<name>/zoo_flat`; a `Reshape` takes its name, so consumers are
    untouched. Returns how many lookups were wrapped.
    """
    path = Path(model_dir) / "model.json"
    model = json.loads(path.read_text())
    nodes = model["modelTopology"].get("node", [])
    out, count = [], 0
    for node in nodes:
        if node.get("op") != "LookupTableFindV2":
            out.append(node)
            continue
        name = node["name"]
        keys = node["input"][1]
        attr = node.get("attr", {})
        out += [
            {**node, "name": f"{name}/zoo_flat"},
            {"name": f"{name}/zoo_keys_shape", "op": "Shape", "input": [keys],
             "attr": {"T": attr.get("Tin", {"type": "DT_STRING"}), "out_type": {"type": "DT_INT32"}}},
            {"name": name, "op": "Reshape", "input": [f"{name}/zoo_flat", f"{name}/zoo_keys_shape"],
             "attr": {"T": attr.get("Tout", {"type": "DT_INT64"}), "Tshape": {"type": "DT_INT32"}}},
        ]
        count += 1
    if count:
        model["modelTopology"]["node"] = out
        path.write_text(json.dumps(model))
    return count


def check_saved_model_ops(saved_model_dir, layers: dict[str, str], signature_key: str = SERVING_SIGNATURE) -> None:
    """Raises `UnsupportedOpsError` for ops of the SavedModel's frozen signature that tfjs cannot run.

    For when the converter itself fails: with its op check off it can crash on such ops
    ("AssertionError: Identity is not in graph" for TextVectorization's ragged string ops).
    """
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    loaded = tf.saved_model.load(str(saved_model_dir))  # kept alive: the signature references its variables
    graph_def = convert_variables_to_constants_v2(loaded.signatures[signature_key]).graph.as_graph_def()
    unknown = unknown_ops(graph_def, supported_ops() | REWRITTEN)
    if unknown:
        raise unsupported_ops_error("TF.js (tfjs 4.22)", unknown, layers)


def unsupported_graph_ops(graph_def) -> list[OpGap]:
    """The ops of a frozen TensorFlow graph (control flow v2, as the export's RNN route converts it)
    that tfjs cannot run: `zoo export --check`'s TF.js answer, before any conversion."""
    return [OpGap(op, tuple(nodes)) for op, nodes in sorted(unknown_ops(graph_def, supported_ops() | REWRITTEN).items())]


def check_ops(model_dir, layers: dict[str, str]) -> None:
    """Raises `UnsupportedOpsError` for ops of `model_dir/model.json` that tfjs cannot run."""
    model = json.loads((Path(model_dir) / "model.json").read_text())
    known = supported_ops()
    unknown: dict[str, list[str]] = {}
    for node in _all_nodes(model):
        if node.get("op") not in known:
            unknown.setdefault(node.get("op"), []).append(node.get("name", ""))
    if unknown:
        raise unsupported_ops_error("TF.js (tfjs 4.22)", unknown, layers)
