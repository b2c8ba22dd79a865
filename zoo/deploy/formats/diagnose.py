"""What a format cannot hold: the op, the Keras layer it came from, and what the user can do.

Converters report ops by graph node name (`StatefulPartitionedCall/model_1/
stage_2_gelu_1/Gelu/Erfc`); the user knows layers. Keras scopes each op under
the name of the layer that made it (plus a `_<n>` call suffix), so the
innermost scope that names a layer of the model is that layer.
"""

from __future__ import annotations

import dataclasses
import re

from zoo.errors import ZooError

# Ops by what they are; the advice differs.
STRING_OPS = frozenset({
    "StringLower", "StringUpper", "StaticRegexReplace", "RegexReplace", "StringSplit", "StringSplitV2",
    "StringToHashBucketFast", "StringToHashBucketStrong", "StringJoin", "StringStrip", "Substr",
    "UnicodeDecode", "UnicodeEncode", "UnicodeDecodeWithOffsets", "StringNGrams", "StringFormat",
    "AsString", "StringToNumber", "ReduceJoin",
})
TABLE_OPS = frozenset({
    "HashTableV2", "MutableHashTableV2", "MutableDenseHashTableV2", "LookupTableFindV2", "LookupTableImportV2",
    "LookupTableSizeV2", "LookupTableExportV2", "InitializeTableV2", "InitializeTableFromTextFileV2",
})
RAGGED_PREFIXES = ("Ragged",)
PREPROCESSING_LAYERS = frozenset({"StringLookup", "IntegerLookup", "TextVectorization", "Hashing", "CategoryEncoding",
                                  "Discretization", "HashedCrossing"})


class UnsupportedOpsError(ZooError, RuntimeError):
    """A converted graph holds ops its format cannot run; the message names them, their layers and a way out."""

    def __init__(self, message: str, ops: dict):
        super().__init__(message)
        self.ops = ops  # op -> [layer names]


@dataclasses.dataclass(frozen=True)
class OpGap:
    """An op type a format cannot run as it ships, the graph nodes of that type, and what would run it
    (`needs`: e.g. TFLite's Flex delegate), or None when nothing in the format can."""

    op: str
    nodes: tuple[str, ...]
    needs: str | None = None


def graph_nodes(graph_def) -> list[tuple[str, str]]:
    """`(op, name)` of every node of a GraphDef, those of its functions (loop bodies, branches) too.

    A function's node is named `<caller node>/<node>`, the caller being the node that calls the
    function (`While`, `If`, `PartitionedCall`), so `layer_of` finds the layer of a loop body's op
    even where the body's own names carry no layer scope.
    """
    callers: dict[str, str] = {}

    def called(node) -> list[str]:
        names = []
        for value in node.attr.values():
            if value.HasField("func"):
                names.append(value.func.name)
            names += [f.name for f in value.list.func]
        return names

    for node in graph_def.node:
        for function in called(node):
            callers.setdefault(function, node.name)
    functions = {f.signature.name: f for f in graph_def.library.function}
    changed = True
    while changed:  # functions called from functions: the caller's path, outermost first
        changed = False
        for name, function in functions.items():
            if name not in callers:
                continue
            for node in function.node_def:
                for inner in called(node):
                    if inner not in callers:
                        callers[inner] = f"{callers[name]}/{node.name}"
                        changed = True
    out = [(node.op, node.name) for node in graph_def.node]
    for name, function in functions.items():
        prefix = callers.get(name, name)
        out += [(node.op, f"{prefix}/{node.name}") for node in function.node_def]
    return out


def unknown_ops(graph_def, known) -> dict[str, list[str]]:
    """op -> node names, for the nodes of `graph_def` (functions included) whose op is not in `known`."""
    found: dict[str, list[str]] = {}
    for op, name in graph_nodes(graph_def):
        if op not in known:
            found.setdefault(op, []).append(name)
    return found


# Ops that write a variable inside the model's call: a counter's `assign_add`, a `keras.random.SeedGenerator`'s
# next state (keras/src/export/saved_model_test.py's test_model_with_non_trainable_state_export and
# test_model_with_rng_export).
ASSIGN_OPS = frozenset({"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"})


def saved_model_nodes(saved_model_dir, signature_key: str = "serving_default") -> list[tuple[str, str]]:
    """`(op, name)` of every node of a SavedModel's serving function, not frozen (freezing fails on a graph that
    writes its variables), its called functions included (`graph_nodes`)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model_dir))  # kept alive while its function is read
    return graph_nodes(loaded.signatures[signature_key].graph.as_graph_def())


def nodes_of(nodes: list[tuple[str, str]], ops) -> dict[str, list[str]]:
    """op -> node names, for the nodes whose op is in `ops`."""
    found: dict[str, list[str]] = {}
    for op, name in nodes:
        if op in ops:
            found.setdefault(op, []).append(name)
    return found


def writes_variables_error(fmt: str, nodes: dict[str, list[str]], layers: dict[str, str],
                           what: str) -> UnsupportedOpsError:
    """The error of a format that freezes every variable into a constant, for a model that writes its own
    (`nodes`: op -> node names of `ASSIGN_OPS`); `what`: what the format did with them."""
    error = unsupported_ops_error(fmt, nodes, layers)
    named = sorted({n for names in error.ops.values() for n in names})
    where = ", ".join(f"'{n}' ({layers[n]})" for n in named) or "the model"
    message = (f"{fmt} {what}: {where} writes a variable inside call() ("
               + ", ".join(f"{op} x{len(v)}" for op, v in sorted(nodes.items())) + "), such as a counter or a "
               "keras.random.SeedGenerator's state, and the format freezes every variable into a constant. Serve "
               "the SavedModel, which keeps the variable and its updates, or keep the state outside the model "
               "(pass it in as an input; draw random numbers with a seed input or outside the model).")
    return UnsupportedOpsError(message, error.ops)


def layer_of(node_name: str, layers: dict[str, str]) -> str | None:
    """The Keras layer (a key of `layers`: name -> class name) whose scope holds the node, innermost first."""
    parts = [p for p in node_name.split(":")[0].split("/") if p]
    for part in reversed(parts):
        for candidate in (part, re.sub(r"_\d+$", "", part)):
            if candidate in layers:
                return candidate
    return None


def unsupported_ops_error(fmt: str, nodes: dict[str, list[str]], layers: dict[str, str]) -> UnsupportedOpsError:
    """The error for `nodes` (op -> node names) that `fmt` cannot run, naming each op's layers and a remedy."""
    by_op = {}
    parts = []
    for op, names in sorted(nodes.items()):
        found = sorted({layer for layer in (layer_of(n, layers) for n in names) if layer})
        by_op[op] = found
        where = (", ".join(f"'{n}' ({layers[n]})" for n in found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4
                 else "")) if found else "no Keras layer scope (a model-level op)"
        parts.append(f"{op} x{len(names)} in {where}")
    message = f"{fmt} cannot run {len(nodes)} op type(s): " + "; ".join(parts) + ". " + advice(fmt, by_op, layers)
    return UnsupportedOpsError(message, by_op)


def advice(fmt: str, by_op: dict[str, list[str]], layers: dict[str, str]) -> str:
    """What the user can do about these ops in this format."""
    ops = set(by_op)
    classes = {layers[n] for names in by_op.values() for n in names}
    text_like = (ops & (STRING_OPS | TABLE_OPS)) or any(op.startswith(RAGGED_PREFIXES) for op in ops) or (
        classes & PREPROCESSING_LAYERS)
    if text_like:
        return (f"These are string/lookup preprocessing ops, which {fmt} does not hold: run that preprocessing "
                "outside the model (export the model from the integer ids or numbers the preprocessing outputs, "
                "and ship the vocabulary to the client), or serve the SavedModel, which holds every TensorFlow op.")
    return (f"Serve the SavedModel (it holds every TensorFlow op), or replace the named layer(s) with layers "
            f"built from ops {fmt} supports.")
