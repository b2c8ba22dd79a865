"""TensorFlow graphs (a `GraphDef` and its function library) checked against the unsafe-op table.

Shared by the SavedModel reader (each MetaGraph) and the TF.js graph-model reader (its
`modelTopology` is a GraphDef in JSON). Every node of the graph and of every function in
the library is checked, reachable or not: `tf.saved_model.load` restores every function
as a callable. A finding names the function that holds the op and the entry points
(signatures, the saver, the init op) from which it is reached.
"""

from __future__ import annotations

import collections

from zoo.deploy.formats.unsafe import CUSTOM_TF_OP, TF_OPS, Finding


def _called(node, functions) -> list[str]:
    """Functions a node calls: its op (a direct call) and its function-valued attributes."""
    names = [node.op] if node.op in functions else []
    for value in node.attr.values():
        kind = value.WhichOneof("value")
        if kind == "func":
            names.append(value.func.name)
        elif kind == "list":
            names += [f.name for f in value.list.func]
    return [n for n in names if n in functions]


def _node_name(tensor: str) -> str:
    """'^name', 'name:0', 'name:out:0' -> 'name'."""
    return tensor.lstrip("^").split(":", 1)[0]


def _upstream(graph, outputs) -> set[str]:
    """Names of the top-level nodes `outputs` depend on (inputs and control inputs)."""
    nodes = {n.name: n for n in graph.node}
    seen, todo = set(), [_node_name(t) for t in outputs]
    while todo:
        name = todo.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        todo += [_node_name(i) for i in nodes[name].input]
    return seen


def _applies(entry, node) -> bool:
    if entry.only_if is None:
        return True
    attr, prefix = entry.only_if
    value = node.attr[attr].s.decode("utf-8", "replace") if attr in node.attr else ""
    return value.startswith(prefix)


def scan_graph(graph, entries: dict[str, list[str]] | None = None, checkpoint_entry: str | None = None):
    """(findings, nodes scanned) for `graph`, a GraphDef message.

    Args:
        entries: entry point label -> the tensor or node names it runs, e.g.
            `{"signature 'serving_default'": ["StatefulPartitionedCall:0"]}`.
        checkpoint_entry: the label in `entries` of the SavedModel's saver: checkpoint ops
            (`UnsafeOp.checkpoint`) are expected there and not reported.
    """
    functions = {f.signature.name: f for f in graph.library.function}
    callees = {name: {c for n in f.node_def for c in _called(n, functions)} for name, f in functions.items()}
    reached_by = collections.defaultdict(set)  # function or top-level node name -> entry labels
    for label, outputs in (entries or {}).items():
        top = _upstream(graph, outputs)
        for name in top:
            reached_by[("node", name)].add(label)
        todo = [c for n in graph.node if n.name in top for c in _called(n, functions)]
        seen = set()
        while todo:
            fn = todo.pop()
            if fn not in seen:
                seen.add(fn)
                reached_by[("function", fn)].add(label)
                todo += callees[fn]

    findings, scanned = [], 0
    for kind, container, nodes in [("node", n.name, [n]) for n in graph.node] + [
            ("function", name, f.node_def) for name, f in functions.items()]:
        scanned += len(nodes)
        labels = reached_by.get((kind, container), set())
        counts = collections.Counter()
        for node in nodes:
            entry = TF_OPS.get(node.op) or (CUSTOM_TF_OP if ">" in node.op else None)
            if entry is None or (entry.checkpoint and checkpoint_entry in labels) or not _applies(entry, node):
                continue
            counts[node.op] += 1
        for op, count in counts.items():
            entry = TF_OPS.get(op, CUSTOM_TF_OP)
            where = f"{'graph node' if kind == 'node' else 'function'} '{container}'"
            if labels:
                where += " (reached from " + ", ".join(sorted(labels)) + ")"
            findings.append(Finding.of(entry, where, op=op, count=count))
    return findings, scanned
