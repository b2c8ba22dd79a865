"""ONNX: every node of the graph, its subgraphs (If, Loop, Scan) and the model's local functions,
plus where external tensor data would be read from. Loaded with `onnx.load(...,
load_external_data=False)`: the protobuf only, no external file is opened.

A node outside the standard domains (`unsafe.ONNX_STANDARD_DOMAINS`) and not a call
of a function the model defines needs a custom-op library. External data whose
`location` is absolute or leaves the model's folder reads any file the runtime can
(the ONNX external-data spec requires a path relative to the model).
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

from zoo.scan.report import ArtifactError, Finding
from zoo.formats.unsafe import CUSTOM_ONNX_OP, EXTERNAL_DATA, ONNX_STANDARD_DOMAINS


def _external_location(tensor) -> str | None:
    if tensor.data_location != tensor.EXTERNAL:
        return None
    return next((e.value for e in tensor.external_data if e.key == "location"), "")


def _escapes(location: str, folder: Path) -> bool:
    if not location or os.path.isabs(location) or "://" in location:
        return True
    resolved = os.path.realpath(folder / location)
    return os.path.commonpath([resolved, os.path.realpath(folder)]) != os.path.realpath(folder)


def scan(path: Path):
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, OSError, ValueError) as e:
        raise ArtifactError(f"{path} is not a readable ONNX model: {e}") from None
    local = {(f.domain, f.name) for f in model.functions}
    folder = path.parent
    findings, scanned = [], 0

    def check_tensor(tensor, where):
        location = _external_location(tensor)
        if location is not None and _escapes(location, folder):
            findings.append(Finding.of(EXTERNAL_DATA, f"{where} tensor '{tensor.name}'",
                                       why=f"{EXTERNAL_DATA.why}: {location!r}"))

    def walk(nodes, where, initializers=()):
        nonlocal scanned
        for t in initializers:
            check_tensor(t, where)
        custom, first = collections.Counter(), {}
        for node in nodes:
            scanned += 1
            if node.domain not in ONNX_STANDARD_DOMAINS and (node.domain, node.op_type) not in local:
                op = f"{node.domain}.{node.op_type}"
                custom[op] += 1
                first.setdefault(op, node.name)
            for attr in node.attribute:
                if attr.HasField("t"):
                    check_tensor(attr.t, f"{where} node '{node.name}'")
                for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    walk(g.node, f"{where} > node '{node.name}' subgraph '{g.name}'", g.initializer)
        for op, count in custom.items():
            findings.append(Finding.of(CUSTOM_ONNX_OP, f"{where} node '{first[op]}'", op=op, count=count))

    walk(model.graph.node, f"graph '{model.graph.name}'", model.graph.initializer)
    for f in model.functions:
        walk(f.node, f"function '{f.domain}.{f.name}'")
    return findings, scanned
