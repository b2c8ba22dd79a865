"""Legacy Keras HDF5 (`.h5`): a model file zoo scans but does not run.

Its `model_config` and `training_config` attributes are read as JSON. Keras 2 wrote the
architecture as a JSON string attribute of the root group
(`keras/src/legacy/saving/legacy_h5_format.py: save_model_to_hdf5`); a weights-only file has no
config and holds data only. zoo opens `.keras` files only: load an `.h5` in Keras and save it as
`.keras` to use it here.
"""

from __future__ import annotations

import json
from pathlib import Path

from zoo.deploy.formats.base import ArtifactError, Kind, head
from zoo.deploy.formats.runner import DEFAULT_THREADS
from zoo.deploy.formats.unsafe.keras_config import scan_config

KIND = Kind(
    name="h5",
    description="a legacy Keras 2 HDF5 model file: scanned, not run",
    layout="an HDF5 file (its signature bytes), usually `*.h5`",
    runtime="none: load it in Keras and save it as .keras",
    metadata_at="none",
    scan_reads="the `model_config` and `training_config` attributes, as JSON",
    suffixes=(".h5", ".hdf5"),
)
ATTRIBUTES = ("model_config", "training_config")
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def recognise(path: Path) -> bool:
    return path.is_file() and head(path) == HDF5_MAGIC


def read_metadata(path: Path) -> None:
    """None: zoo never wrote an .h5."""
    return None


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None):
    raise ArtifactError(f"{path} is a legacy Keras .h5 file, which zoo scans but does not run: load it with "
                        "keras.saving.load_model and save it as .keras (after `zoo scan`).")


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
