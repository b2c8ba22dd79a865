"""Loading weights into a zoo model by layer name, with a report of everything that did not match.

Sources (`read_weight_file` tells them apart by content, not only by suffix):

- keras.applications' `.h5` downloads, e.g. `resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5`:
  Keras 2's legacy layout, one group per layer with a `weight_names` attribute
  (`conv1_conv/kernel:0`). A group holding a nested model's weights (ConvNeXt's
  `Sequential` stem) is split by the inner layer names in its weight names.
- Keras 3 `.weights.h5` files and the `model.weights.h5` inside `.keras` archives and
  preset folders: each layer's `vars` group carries the layer's name.

`load_weights` maps file layers onto model layers by name: exactly, then through
the architecture's declared aliases (`KerasTwin.layer_aliases`, plus
`predictions` -> `head_dense` for zoo's classifier head), then without Keras'
`_N` uniquifying suffix (`normalization_3`). Within a layer, weights are
matched by name where both sides name them alike (Keras 2 calls a depthwise
kernel `depthwise_kernel`, Keras 3 `kernel`), else in order, and every shape
is checked. Nothing is assigned unless everything checks out, or the caller
allowed the mismatches (`skip_mismatch`, `new_head`); skipped layers are named
in the returned `LoadReport`. A model is never left with random layers silently.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import zipfile
from pathlib import Path

import numpy as np

from zoo.architectures.blocks import KERAS_HEAD_ALIASES
from zoo.architectures.heads import classifier_layer, weighted_layers
from zoo.core import presets
from zoo.errors import ZooError, suggest

LEGACY_H5 = "keras.applications-style .h5 (Keras 2 legacy layout)"
KERAS_WEIGHTS = "Keras 3 .weights.h5"
KERAS_ARCHIVE = ".keras archive"
# Keras 2 and Keras 3 names for the same weight.
_WEIGHT_NAME_ALIASES = {"depthwise_kernel": "kernel"}


class WeightsMismatchError(ZooError, ValueError):
    """Weights that do not fit the model: missing layers, wrong shapes, an unreadable file."""


@dataclasses.dataclass
class FileLayer:
    """One layer's weights as stored in a file: names (None where the format has none) and arrays, in order."""

    name: str
    weight_names: list
    arrays: list


@dataclasses.dataclass
class WeightFile:
    path: str
    format: str
    layers: dict  # layer name -> FileLayer, in file order


@dataclasses.dataclass
class LoadReport:
    """What `load_weights` did: every model layer with weights is in `loaded` or `skipped`."""

    source: str
    format: str
    loaded: list = dataclasses.field(default_factory=list)
    skipped: dict = dataclasses.field(default_factory=dict)  # layer -> reason (left as initialized)
    renamed: dict = dataclasses.field(default_factory=dict)  # model layer -> file layer, where names differ
    unused: list = dataclasses.field(default_factory=list)  # file layers no model layer took
    notes: list = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"loaded {len(self.loaded)} layers from {self.source} ({self.format})"]
        lines += [f"  skipped {name}: {reason}" for name, reason in self.skipped.items()]
        if self.unused:
            lines.append(f"  not used from the file: {', '.join(self.unused)}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class WeightSource:
    """Where `zoo.build(..., weights=...)` reads from: a weight file, and the preset it belongs to, if any."""

    path: Path
    preset: presets.Preset | None = None


_FILE_SUFFIXES = (".h5", ".hdf5", ".keras")


def resolve(weights) -> WeightSource:
    """A preset name, a preset folder, or a weight file path -> what to load (checked to exist)."""
    if isinstance(weights, presets.Preset):
        return WeightSource(weights.weights_path, weights)
    if not isinstance(weights, (str, os.PathLike)):
        raise TypeError(f"weights must be a preset name or a path. Received: weights={weights!r}")
    path = Path(weights).expanduser()
    if path.is_dir():
        preset = presets.read_preset(path)
        return WeightSource(preset.weights_path, preset)
    if path.is_file():
        return WeightSource(path)
    if str(weights) == "imagenet":
        raise WeightsMismatchError(
            "zoo downloads nothing: pass the path of keras.applications' ImageNet weight file instead of 'imagenet' "
            "(keras keeps its downloads in ~/.keras/models/)."
        )
    if path.suffix in _FILE_SUFFIXES or os.sep in str(weights):
        raise WeightsMismatchError(f"Weight file {str(weights)!r} does not exist.")
    preset = presets.open_preset(str(weights))
    return WeightSource(preset.weights_path, preset)


# --- reading ---------------------------------------------------------------------------------------


def _attr_list(group, name: str) -> list[str]:
    """A string-list attribute, including Keras' chunked form (`name0`, `name1`, ... past HDF5's 64 KB limit)."""
    if name in group.attrs:
        values = list(group.attrs[name])
    else:
        values, chunk = [], 0
        while f"{name}{chunk}" in group.attrs:
            values.extend(group.attrs[f"{name}{chunk}"])
            chunk += 1
    return [v.decode("utf8") if hasattr(v, "decode") else str(v) for v in values]


def _short_name(path: str) -> str:
    """'conv1_conv/kernel:0' -> 'kernel'."""
    return path.rsplit("/", 1)[-1].split(":", 1)[0]


def _owner(path: str) -> str | None:
    """'stem/stem_conv/kernel:0' -> 'stem_conv' (the layer that owns the weight), None for a bare name."""
    parts = path.split("/")
    return parts[-2] if len(parts) >= 2 else None


def _read_legacy(root, path: str) -> WeightFile:
    if "model_weights" in root and "layer_names" not in root.attrs:
        root = root["model_weights"]  # a whole model saved by Keras 2's model.save
    layers: dict[str, FileLayer] = {}
    for group_name in _attr_list(root, "layer_names"):
        group = root[group_name]
        names = _attr_list(group, "weight_names")
        if not names:
            continue
        arrays = [np.asarray(group[n]) for n in names]
        owners = {_owner(n) for n in names}
        if len(owners) > 1 and None not in owners:  # a nested model: one group, several layers
            for owner in dict.fromkeys(_owner(n) for n in names):
                picked = [i for i, n in enumerate(names) if _owner(n) == owner]
                layers[owner] = FileLayer(owner, [_short_name(names[i]) for i in picked], [arrays[i] for i in picked])
        else:
            layers[group_name] = FileLayer(group_name, [_short_name(n) for n in names], arrays)
    return WeightFile(path, LEGACY_H5, layers)


def _read_keras3(root, path: str, fmt: str) -> WeightFile:
    layers: dict[str, FileLayer] = {}

    def visit(name, obj):
        if not name.startswith("layers/") or not name.endswith("/vars") or "name" not in obj.attrs:
            return
        keys = sorted(obj.keys(), key=int)
        if keys:
            layer = obj.attrs["name"]
            layer = layer.decode("utf8") if hasattr(layer, "decode") else str(layer)
            layers[layer] = FileLayer(layer, [None] * len(keys), [np.asarray(obj[k]) for k in keys])

    root.visititems(visit)
    return WeightFile(path, fmt, layers)


def read_weight_file(path) -> WeightFile:
    """Reads every layer's weights from a `.h5`, `.weights.h5` or `.keras` file (no model needed)."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise WeightsMismatchError(f"Weight file {str(path)!r} does not exist.")
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                if "model.weights.h5" not in archive.namelist():
                    raise WeightsMismatchError(f"{str(path)!r} is a zip archive without model.weights.h5: not a .keras file.")
                data = io.BytesIO(archive.read("model.weights.h5"))
            with h5py.File(data, "r") as root:
                return _read_keras3(root, str(path), KERAS_ARCHIVE)
        with h5py.File(path, "r") as root:
            if "layer_names" in root.attrs or "layer_names0" in root.attrs or "model_weights" in root:
                return _read_legacy(root, str(path))
            if "layers" in root:
                return _read_keras3(root, str(path), KERAS_WEIGHTS)
    except OSError as e:
        raise WeightsMismatchError(f"Cannot read {str(path)!r} as HDF5 or a .keras archive: {e}") from None
    raise WeightsMismatchError(
        f"{str(path)!r} holds no Keras weights: neither a `layer_names` attribute (keras.applications/Keras 2 "
        "layout) nor a `layers` group (Keras 3 .weights.h5)."
    )


# --- matching --------------------------------------------------------------------------------------


def _base_name(name: str) -> str:
    return re.sub(r"_\d+$", "", name)


def _match_layers(file: WeightFile, model_names: list[str], aliases: dict) -> tuple[dict, list]:
    """model layer name -> file layer name, and the file layers nothing took."""
    wanted = set(model_names)
    aliases = {**KERAS_HEAD_ALIASES, **aliases}
    taken: dict[str, str] = {}
    unused = []
    for f in file.layers:
        candidates = [f, aliases.get(f), _base_name(f), aliases.get(_base_name(f))]
        target = next((c for c in candidates if c in wanted), None)
        if target is None or target in taken:
            unused.append(f)
            continue
        taken[target] = f
    return taken, unused


def _align(layer, entry: FileLayer) -> tuple[list | None, str | None]:
    """(arrays in the order of `layer.weights`, None) or (None, why they do not fit)."""
    targets = layer.weights
    if len(entry.arrays) != len(targets):
        return None, (f"the file has {len(entry.arrays)} weights for it ({', '.join(map(str, entry.weight_names))}), "
                      f"the layer {len(targets)} ({', '.join(w.name for w in targets)})")
    wanted = [_WEIGHT_NAME_ALIASES.get(w.name, w.name) for w in targets]
    given = [_WEIGHT_NAME_ALIASES.get(n, n) for n in entry.weight_names]
    arrays = list(entry.arrays)
    if None not in given and sorted(wanted) == sorted(given) and len(set(wanted)) == len(wanted):
        arrays = [entry.arrays[given.index(n)] for n in wanted]
    for w, a in zip(targets, arrays):
        if tuple(w.shape) != tuple(a.shape):
            return None, f"{w.name} has shape {tuple(w.shape)}, the file's {tuple(a.shape)}"
    return arrays, None


def load_weights(model, path, *, skip_mismatch: bool = False, new_head: bool = False, aliases=None,
                 after_load=None) -> LoadReport:
    """Loads a weight file into `model` by layer name; returns the report, or raises on any mismatch.

    Args:
        model: a built Keras model (a zoo model, or any functional model).
        path: a keras.applications `.h5`, a `.weights.h5` or a `.keras` file.
        skip_mismatch: leave layers the file lacks, or holds with other shapes,
            as initialized (each is named in `report.skipped`) instead of raising.
        new_head: leave the classifier (the last layer with weights) as
            initialized, for a new set of classes; everything else must load.
        aliases: file layer name -> model layer name, where they differ.
        after_load: `fn(model) -> str | None`, run after loading a
            keras.applications file (`KerasTwin.after_load`); its note goes in the report.

    Raises:
        WeightsMismatchError: naming every layer that did not load (with the
            closest names in the file) and every shape that differs.
    """
    file = read_weight_file(path)
    layers = weighted_layers(model)
    by_name = {layer.name: layer for layer in layers}
    matched, unused = _match_layers(file, list(by_name), dict(aliases or {}))
    head = classifier_layer(model).name if new_head else None
    report = LoadReport(source=str(path), format=file.format, unused=unused)
    assignments, problems = [], []
    for layer in layers:
        if layer.name == head:
            report.skipped[layer.name] = "new head (re-initialized for this model's classes)"
            continue
        entry = file.layers.get(matched.get(layer.name))
        if entry is None:
            close = suggest(layer.name, unused or list(file.layers), n=3)
            reason = "not in the file" + (f" (closest there: {', '.join(close)})" if close else "")
        else:
            arrays, reason = _align(layer, entry)
            if arrays is not None:
                assignments.append((layer, arrays))
                report.loaded.append(layer.name)
                if entry.name != layer.name:
                    report.renamed[layer.name] = entry.name
                continue
        if skip_mismatch:
            report.skipped[layer.name] = reason
        else:
            problems.append(f"{layer.name}: {reason}")
    if problems:
        hint = "; new_head=True re-initializes only the classifier" if len(problems) == 1 else ""
        raise WeightsMismatchError(
            f"{len(problems)} of {len(layers)} layers of {model.name!r} cannot load from {path} ({file.format}):\n  "
            + "\n  ".join(problems)
            + f"\nPass skip_mismatch=True to leave them as initialized{hint}."
        )
    if not assignments:
        raise WeightsMismatchError(
            f"No layer of {model.name!r} matched {path}: is it the weight file of another architecture? "
            f"Its first layers: {', '.join(list(file.layers)[:5])}."
        )
    for layer, arrays in assignments:
        for variable, array in zip(layer.weights, arrays):
            variable.assign(array.astype(variable.dtype) if hasattr(array, "astype") else array)
        if hasattr(layer, "finalize_state"):
            layer.finalize_state()  # e.g. Normalization computes with copies of its variables
    if after_load is not None and file.format == LEGACY_H5:
        note = after_load(model)
        if note:
            report.notes.append(note)
    return report
