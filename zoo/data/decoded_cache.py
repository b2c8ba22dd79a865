"""Decoded splits kept on disk, so that no epoch of any run decodes images again.

Decoding is the expensive part of reading an image dataset: MNIST's PNGs
decode slower than a small convnet trains (`results/layers/README.md`), so
a first epoch that decodes waits on its data. The first read of a split
that fits in memory writes its decoded arrays (uint8 pixels, labels) to one
`.npz` file; every later `load` of it in any process reads that file (far
faster than decoding) and starts its
first epoch from memory (`zoo.data.memory`). `zoo data prepare` builds the
file right after preparing the dataset.

Where: TFDS datasets under `<data_dir>/zoo_decoded/`, next to the prepared
data; image folders under `$ZOO_CACHE_DIR` (default `~/.cache/zoo`), keyed
by a hash of every file's path, size and modification time and of the
decoding settings, so a changed folder is decoded again. Files are written
atomically (a reader never sees half a file); delete them to free space.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from zoo.data.memory import Arrays
from zoo.fileio import atomic_write

_FORMAT = 1  # bump when the layout of the files changes


def cache_dir() -> Path:
    """`$ZOO_CACHE_DIR`, else `~/.cache/zoo`."""
    value = os.environ.get("ZOO_CACHE_DIR", "").strip()
    return Path(os.path.expanduser(value)) if value else Path.home() / ".cache" / "zoo"


def load_or_build(path: Path, build: Callable[[], Arrays], rows: int | None = None) -> Arrays:
    """The arrays stored at `path`; on a miss (an unreadable file, or not `rows` rows where given)
    `build()`'s, written there first."""
    path = Path(path)
    if path.is_file():
        try:
            stored = _read(path)
            if rows is None or len(stored) == rows:
                return stored
        except (OSError, ValueError, KeyError):
            pass  # a file from an older format or a damaged one: rebuild it
    arrays = build()
    try:
        _write(path, arrays)
    except OSError:
        pass  # a read-only data dir: the arrays still serve this process
    return arrays


def _write(path: Path, arrays: Arrays) -> None:
    import keras

    leaves = keras.tree.flatten(arrays.data)
    structure = keras.tree.map_structure(lambda _: None, arrays.data)
    meta = {"format": _FORMAT, "count": len(leaves), "structure": _describe(structure)}
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(f):
        np.savez(f, meta=json.dumps(meta), **{f"a{i}": a for i, a in enumerate(leaves)})

    atomic_write(path, write, binary=True)


def _read(path: Path) -> Arrays:
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f["meta"]))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{path}: cache format {meta.get('format')}, expected {_FORMAT}")
        leaves = [f[f"a{i}"] for i in range(meta["count"])]
    import keras

    return Arrays(keras.tree.pack_sequence_as(_rebuild(meta["structure"]), leaves))


def _describe(structure):
    if isinstance(structure, dict):
        return {"dict": {k: _describe(v) for k, v in structure.items()}}
    if isinstance(structure, (tuple, list)):
        return {"tuple": [_describe(v) for v in structure]}
    return None


def _rebuild(description):
    if description is None:
        return None
    if "dict" in description:
        return {k: _rebuild(v) for k, v in description["dict"].items()}
    return tuple(_rebuild(v) for v in description["tuple"])


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "all"


def tfds_path(builder, split: str, data_dir: str) -> Path:
    """Where a TFDS split's decoded arrays live: `<data_dir>/zoo_decoded/<name>/<config>/<version>/<split>.npz`.

    The prepared dataset's `dataset_info.json` modification time is part of the file name, so
    re-preparing the dataset invalidates the file.
    """
    info_file = Path(os.fspath(builder.data_dir)) / "dataset_info.json"
    stamp = info_file.stat().st_mtime_ns if info_file.is_file() else 0
    parts = [builder.name, builder.builder_config.name if builder.builder_config else "", str(builder.version)]
    return Path(data_dir, "zoo_decoded", *[_safe(p) for p in parts if p], f"{_safe(split)}-{stamp}.npz")


def files_key(files, settings: dict) -> str:
    """A hash of files (path, size, mtime) and of the settings that decode them."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for file in files:
        st = os.stat(file)
        digest.update(f"{os.path.abspath(file)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]
