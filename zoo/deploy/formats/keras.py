"""`.keras` archives (Keras 3): the model file zoo trains, exports from and opens in Keras.

Not an export format: a kind of artifact zoo reads. Its `config.json`, inside the zip, is read as
JSON for the scan and the metadata, never deserialized; `load` deserializes it with Keras's
safe_mode (callers scan it first: `zoo.deploy.artifacts.load_model_file`).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from zoo.deploy.formats.base import ArtifactError, Kind
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner, join_batches
from zoo.deploy.formats.unsafe.keras_config import scan_config

KIND = Kind(
    name="keras",
    description="a Keras 3 model archive: what zoo trains and exports from",
    layout="a `.keras` file (a zip holding `config.json`), or a run directory's `last.keras`",
    runtime="Keras (safe_mode)",
    metadata_at="the model's config (`ZooModel.get_config`), so it survives `model.save` / `load_model`",
    scan_reads="`config.json`: every object the config names (Lambda, custom classes, Keras's non-modeling "
               "functions), as JSON",
    suffixes=(".keras",),
)
CONFIG = "config.json"  # keras/src/saving/saving_lib.py: _CONFIG_FILENAME
MAX_CONFIG_BYTES = 256 * 2**20  # a config is kilobytes; a zip bomb is not read past this
# What Keras's own safe_mode refuses (keras/src/layers/core/lambda_layer.py, export/tfsm_layer.py).
SAFE_MODE_REFUSES = ("Lambda", "__lambda__", "TFSMLayer")


def recognise(path: Path) -> bool:
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return CONFIG in z.namelist()


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


def read_metadata(path: Path) -> str | None:
    """From the .keras zip's config.json, without loading the model."""
    from zoo.deploy.formats.metadata import KEY

    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read(CONFIG))
    except (zipfile.BadZipFile, KeyError, ValueError):
        return None
    d = config.get("config", {}).get(KEY)
    return None if d is None else json.dumps(d)


def load(path, *, unsafe_deserialization: bool = False, compile: bool = True):
    """The Keras model in the `.keras` file at `path`, loaded with safe_mode unless `unsafe_deserialization`.

    Registers zoo's own classes first (`import zoo` is lazy). Does not scan: the caller has (the file's
    scan is what `zoo.deploy.artifacts.load_model_file` checks before it calls this).

    Raises:
        ArtifactError: Keras cannot load it, naming the Lambda layers safe_mode refused.
    """
    import keras

    import zoo.architectures  # noqa: F401  registers zoo's Keras classes (ZooModel, layers)
    import zoo.core.fused_optimizers  # noqa: F401  and the optimizers zoo trains with (compile=True)
    import zoo.data.table_scaling  # noqa: F401  and the preprocessing layers of models trained on your own data
    import zoo.quantization  # noqa: F401  registers the quantization-aware layers (QAT models)

    try:
        return keras.saving.load_model(path, safe_mode=not unsafe_deserialization, compile=compile)
    except Exception as e:  # Keras raises ValueError, KeyError, OSError, ... for damaged archives
        refused = [] if unsafe_deserialization else [f for f in _findings(Path(path)) if f.op in SAFE_MODE_REFUSES]
        if refused:
            names = "; ".join(f"{f.op} in {f.location}" for f in refused)
            raise ArtifactError(f"Keras safe_mode refused {str(path)!r}: {names} would run code stored in the file. "
                                "If you trust it, load with unsafe_deserialization=True "
                                "(CLI: --unsafe-deserialization).") from None
        raise ArtifactError(f"Model file {str(path)!r} could not be loaded: {type(e).__name__}: {e}") from None


def _findings(path: Path) -> list:
    try:
        return scan(path)[0]
    except ArtifactError:
        return []


class KerasRunner(Runner):
    """A Keras model called in batches; outputs named as `zoo.deploy.formats.trace.name_outputs` names them."""

    runtime = "Keras (TensorFlow)"

    def __init__(self, model):
        from zoo.deploy.formats.trace import name_outputs, signature_of

        self.model = model
        self._signature = signature_of(model)  # a subclassed model too, from the shapes it was built with
        self.inputs = self._signature.inputs
        self._names = name_outputs
        self.outputs = tuple(_output_infos(model))

    def predict(self, x, batch_size: int = 256) -> dict:
        import tensorflow as tf

        from zoo.deploy.formats.inputs import for_keras

        named = for_keras(self.named(x))
        n = len(next(iter(named.values())))
        parts = []
        for start in range(0, n, batch_size):
            batch = {k: tf.constant(v[start:start + batch_size]) for k, v in named.items()}
            parts.append(self._names(self.model, self.model(*self._signature.pack(batch), training=False)))
        return {name: join_batches([p[name] for p in parts]) for name in parts[0]}


def _output_infos(model):
    from zoo.deploy.formats.runner import tensor_info
    from zoo.deploy.formats.trace import is_functional, name_outputs

    if not is_functional(model):
        return []
    for name, t in name_outputs(model, model.outputs).items():
        yield tensor_info(name, t.shape, str(t.dtype))


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> KerasRunner:
    """The model in Keras, loaded with safe_mode (a caller that trusts it loads it itself: `load`).
    `threads` is not applied: TensorFlow's thread pools are per process."""
    return KerasRunner(load(path))
