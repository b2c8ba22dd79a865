"""Legacy Keras HDF5 (`.h5`): the `model_config` and `training_config` attributes, read as JSON.

Keras 2 wrote the architecture as a JSON string attribute of the root group
(`keras/src/legacy/saving/legacy_h5_format.py: save_model_to_hdf5`); a weights-only
file has no config and holds data only.
"""

from __future__ import annotations

import json
from pathlib import Path

from zoo.formats.unsafe.keras_config import scan_config
from zoo.scan.report import ArtifactError

ATTRIBUTES = ("model_config", "training_config")


def scan(path: Path):
    import h5py

    findings, scanned = [], 0
    try:
        with h5py.File(path, "r") as f:
            texts = {k: f.attrs[k] for k in ATTRIBUTES if k in f.attrs}
    except OSError as e:
        raise ArtifactError(f"{path} is not a readable HDF5 file: {e}") from None
    for key, text in texts.items():
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        try:
            config = json.loads(text)
        except (ValueError, TypeError, RecursionError) as e:
            raise ArtifactError(f"{path}: the {key} attribute is not valid JSON: {e}") from None
        found, n = scan_config(config, root=key if key != "model_config" else "", legacy=True)
        findings += found
        scanned += n
    return findings, scanned
