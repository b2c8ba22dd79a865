"""TF.js models (`model.json`): a graph model's GraphDef (with its function library) or a
layers model's Keras config, and the weight files the manifest points at.

Format: https://www.tensorflow.org/js/guide/save_load ("model.json": `format`,
`modelTopology`, `weightsManifest`). The runtime fetches `weightsManifest[].paths`
relative to `model.json`; a path that is absolute, a URL or leaves the folder reads
elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from zoo.formats.unsafe.graph import scan_graph
from zoo.formats.unsafe.keras_config import scan_config
from zoo.scan.report import ArtifactError, Finding
from zoo.formats.unsafe import EXTERNAL_DATA, Capability


def _weight_paths(manifest, folder: Path):
    findings = []
    for group in manifest if isinstance(manifest, list) else []:
        for p in group.get("paths", []) if isinstance(group, dict) else []:
            p = str(p)
            scheme = p.split("://", 1)[0].lower() if "://" in p else ""
            resolved = os.path.realpath(folder / p)
            outside = os.path.isabs(p) or scheme or \
                os.path.commonpath([resolved, os.path.realpath(folder)]) != os.path.realpath(folder)
            if outside:
                capability = Capability.NETWORK if scheme and scheme != "file" else Capability.FILESYSTEM
                findings.append(Finding(EXTERNAL_DATA.name, capability, "weightsManifest",
                                        f"weights read from outside the model's folder: {p!r}"))
    return findings


def scan(path: Path):
    from google.protobuf import json_format
    from tensorboard.compat.proto import graph_pb2

    try:
        model = json.loads(path.read_text())
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(model, dict) or "modelTopology" not in model:
        raise ArtifactError(f"{path} is not a TF.js model.json (no modelTopology).")
    topology = model["modelTopology"]
    findings = _weight_paths(model.get("weightsManifest"), path.parent)
    if model.get("format") == "graph-model" or (isinstance(topology, dict) and "node" in topology):
        try:
            graph = json_format.ParseDict(topology, graph_pb2.GraphDef(), ignore_unknown_fields=True)
        except (json_format.ParseError, TypeError, ValueError) as e:
            raise ArtifactError(f"{path}: modelTopology is not a GraphDef: {e}") from None
        found, scanned = scan_graph(graph)
    else:
        config = topology.get("model_config", topology) if isinstance(topology, dict) else topology
        found, scanned = scan_config(config, legacy=True)
    return findings + found, scanned
