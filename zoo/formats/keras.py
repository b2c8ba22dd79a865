"""`.keras` archives (Keras 3): `config.json` inside the zip, read as JSON, never deserialized."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from zoo.formats.unsafe.keras_config import scan_config
from zoo.scan.report import ArtifactError

CONFIG = "config.json"  # keras/src/saving/saving_lib.py: _CONFIG_FILENAME
MAX_CONFIG_BYTES = 256 * 2**20  # a config is kilobytes; a zip bomb is not read past this


def read_config(path: Path):
    try:
        with zipfile.ZipFile(path) as archive:
            try:
                info = archive.getinfo(CONFIG)
            except KeyError:
                raise ArtifactError(f"{path} is a zip archive without {CONFIG}: not a .keras file.") from None
            if info.file_size > MAX_CONFIG_BYTES:
                raise ArtifactError(f"{path}: {CONFIG} is {info.file_size} bytes, over {MAX_CONFIG_BYTES}.")
            with archive.open(info) as f:
                text = f.read(MAX_CONFIG_BYTES + 1)
    except (zipfile.BadZipFile, OSError) as e:
        raise ArtifactError(f"{path} is not a readable .keras archive: {e}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ArtifactError(f"{path}: {CONFIG} is not valid JSON: {e}") from None


def scan(path: Path):
    return scan_config(read_config(path))
