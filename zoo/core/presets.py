"""Presets: named pretrained weights in keras-hub's preset folder layout.

A preset is a folder in the local store, `$ZOO_HOME/presets/<name>/`
(`$ZOO_HOME` defaults to `~/.cache/zoo`), holding:

    config.json       the architecture and how to build it: registry name,
                      input shape, classes, builder overrides
    model.weights.h5  the weights (Keras 3 format)
    metadata.json     where the weights come from: the recipe, the data, the
                      metrics reached, the license, the weights' SHA-256

keras-hub (`keras_hub/src/utils/preset_utils.py`) splits a preset the same
way: config to rebuild the model, weights, metadata. `zoo train
--save-preset NAME` writes one; `zoo presets` lists them;
`zoo.build("convnet_bn", weights="convnet_bn_mnist")` loads one. Every read
checks the files, the JSON and the SHA-256 first, so a corrupt or truncated
preset fails with a message naming the file, never with random weights.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
from pathlib import Path

from zoo.errors import UnknownNameError, ZooError
from zoo.fileio import atomic_dir

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
PRESET_FORMAT = "zoo-preset/1"
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")


class PresetError(ZooError, ValueError):
    """A preset that cannot be used: a missing or corrupt file, a checksum or architecture mismatch."""


def zoo_home() -> Path:
    """$ZOO_HOME, else ~/.cache/zoo."""
    value = os.environ.get("ZOO_HOME", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".cache" / "zoo"


def preset_store() -> Path:
    return zoo_home() / "presets"


@dataclasses.dataclass(frozen=True)
class Preset:
    """A checked preset: what to build, and the verified weight file."""

    name: str
    path: Path
    architecture: str
    input_shape: tuple
    num_classes: int
    overrides: dict
    metadata: dict

    @property
    def weights_path(self) -> Path:
        return self.path / WEIGHTS_FILE

    @property
    def build_kwargs(self) -> dict:
        return {"input_shape": self.input_shape, "num_classes": self.num_classes, **self.overrides}


def sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PresetError(
            f"A preset name is lowercase letters, digits, '_', '-' and '.', starting with a letter or digit. "
            f"Received: {name!r}"
        )
    return name


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PresetError(f"Preset {str(path.parent)!r} has no {path.name}.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PresetError(f"Preset file {str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise PresetError(f"Preset file {str(path)!r} must hold a JSON object.")
    return data


def read_preset(path) -> Preset:
    """Reads and checks a preset folder: the three files, the config's fields and the weights' SHA-256."""
    path = Path(path)
    if not path.is_dir():
        raise PresetError(f"Preset folder {str(path)!r} does not exist.")
    config = _read_json(path / CONFIG_FILE)
    metadata = _read_json(path / METADATA_FILE)
    if "class_name" in config and "architecture" not in config:
        raise PresetError(
            f"{str(path)!r} is a keras-hub preset ({config.get('class_name')}), not a zoo one: zoo maps "
            f"keras.applications .h5 files and its own presets. Load it with keras_hub's from_preset."
        )
    missing = [k for k in ("architecture", "input_shape", "num_classes") if k not in config]
    if missing:
        raise PresetError(f"{str(path / CONFIG_FILE)!r} lacks {', '.join(missing)}.")
    weights = path / WEIGHTS_FILE
    if not weights.is_file():
        raise PresetError(f"Preset {str(path)!r} has no {WEIGHTS_FILE}.")
    expected = metadata.get("weights_sha256")
    if not expected:
        raise PresetError(f"{str(path / METADATA_FILE)!r} lacks weights_sha256; the weights cannot be verified.")
    actual = sha256(weights)
    if actual != expected:
        raise PresetError(
            f"Preset {str(path)!r}: {WEIGHTS_FILE} has SHA-256 {actual}, its metadata says {expected}. "
            "The file is corrupt or was replaced; save the preset again."
        )
    return Preset(
        name=path.name,
        path=path,
        architecture=str(config["architecture"]),
        input_shape=tuple(config["input_shape"]),
        num_classes=int(config["num_classes"]),
        overrides=dict(config.get("overrides", {})),
        metadata=metadata,
    )


def preset_names(store=None) -> list[str]:
    store = Path(store) if store else preset_store()
    if not store.is_dir():
        return []
    return sorted(p.name for p in store.iterdir() if p.is_dir() and not p.name.startswith("."))


def open_preset(name_or_path, store=None) -> Preset:
    """A preset by name (in the store) or by folder path, checked."""
    candidate = Path(name_or_path).expanduser()
    if candidate.is_dir():
        return read_preset(candidate)
    store = Path(store) if store else preset_store()
    if (store / str(name_or_path)).is_dir():
        return read_preset(store / str(name_or_path))
    raise UnknownNameError(f"preset (in {store})", str(name_or_path), preset_names(store))


def list_presets(store=None) -> list[tuple[str, Preset | PresetError]]:
    """Every preset in the store, each checked: (name, Preset) or (name, the error that makes it unusable)."""
    out = []
    store = Path(store) if store else preset_store()
    for name in preset_names(store):
        try:
            out.append((name, read_preset(store / name)))
        except PresetError as e:
            out.append((name, e))
    return out


def save_preset(
    model,
    name: str,
    *,
    architecture: str | None = None,
    input_shape=None,
    num_classes: int | None = None,
    overrides: dict | None = None,
    recipe: dict | None = None,
    data: dict | None = None,
    metrics: dict | None = None,
    license: str = "unspecified",
    description: str = "",
    store=None,
    overwrite: bool = False,
) -> Preset:
    """Writes `model`'s weights as preset `name` in the store, atomically; returns it, read back and checked.

    Args:
        architecture, input_shape, num_classes, overrides: what `zoo.build` needs to rebuild the model;
            by default what `zoo.build` recorded on it (`model.zoo_config`).
        recipe: the training configuration (a `TrainConfig` as a dict).
        data: where the training data came from (dataset, splits, examples).
        metrics: what the weights reach, e.g. `{"test_accuracy": 0.991}`.
        license: the weights' license (they inherit the training data's terms).
        overwrite: replace an existing preset of that name (else FileExistsError).
    """
    import keras

    import zoo

    check_name(name)
    built = getattr(model, "zoo_config", None) or {}
    architecture = architecture or built.get("architecture")
    input_shape = input_shape if input_shape is not None else built.get("input_shape")
    num_classes = num_classes if num_classes is not None else built.get("num_classes")
    overrides = overrides if overrides is not None else built.get("overrides", {})
    if architecture is None or input_shape is None or num_classes is None:
        raise PresetError("save_preset needs architecture, input_shape and num_classes for a model not built by "
                          "zoo.build (e.g. one loaded from a .keras file).")
    store = Path(store) if store else preset_store()
    final = store / name
    if final.exists() and not overwrite:
        raise FileExistsError(f"Preset {name!r} already exists in {store}; choose another name or overwrite it.")
    config = {
        "format": PRESET_FORMAT,
        "architecture": architecture,
        "input_shape": list(input_shape),
        "num_classes": int(num_classes),
        "overrides": _jsonable(overrides or {}),
    }
    with atomic_dir(final, exist_ok=overwrite) as tmp:
        model.save_weights(tmp / WEIGHTS_FILE)
        metadata = {
            "name": name,
            "description": description,
            "architecture": architecture,
            "parameter_count": int(model.count_params()),
            "recipe": _jsonable(recipe or {}),
            "data": _jsonable(data or {}),
            "metrics": _jsonable(metrics or {}),
            "license": license,
            "weights_sha256": sha256(tmp / WEIGHTS_FILE),
            "keras_version": keras.__version__,
            "zoo_version": zoo.__version__,
            "date_saved": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        (tmp / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
    return read_preset(final)


def _jsonable(value):
    """Tuples to lists, and anything JSON cannot hold to its string, so metadata always writes."""
    return json.loads(json.dumps(value, default=str))
