"""TF Serving's conventions for a SavedModel: its signatures' names, the model directory layout, warmup records.

Shared by the SavedModel format (`zoo.deploy.formats.saved_model`, which writes and publishes) and `zoo serve`
(which serves what TF Serving would).

- Signatures: `serving_default` (`SERVING_SIGNATURE`) is what TF Serving runs when a request names
  none; `classify` (`CLASSIFY_SIGNATURE`) is what its Classify API runs, a signature with the method
  name `tensorflow/serving/classify` (tensorflow_serving/servables/tensorflow/classifier.cc) taking
  serialized tf.Examples as `inputs` and returning `classes` and `scores`.
- Layout: `<base>/<name>/<version>/`. TF Serving polls `<base>/<name>` and loads integer-named
  subdirectories. A version is published atomically: written to a dot-prefixed temporary directory
  beside it (which TF Serving ignores, not being an integer) and renamed into place, so a crash
  mid-write never leaves a loadable but incomplete version.
- Warmup records: `assets.extra/tf_serving_warmup_requests` in a version. TF Serving replays them when
  it loads a version, before marking it AVAILABLE, so the first real request does not pay for graph
  tracing and memory allocation. The file is a TFRecord of `tensorflow.serving.PredictionLog` protos
  (`tensorflow_serving/apis/prediction_log.proto`), at most 1000 records (TF Serving guide "SavedModel
  Warmup", https://www.tensorflow.org/tfx/serving/saved_model_warmup).

Imports TensorFlow and TF Serving's protos only inside the warmup functions.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import numpy as np

from zoo.fileio import TMP_PREFIX, atomic_dir, ensure_dir

SERVING_SIGNATURE = "serving_default"
SERVING_TAG = "serve"
CLASSIFY_SIGNATURE = "classify"
CLASSIFY_METHOD = "tensorflow/serving/classify"
CLASSIFY_INPUT = "inputs"
WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_RECORDS = 1000  # TF Serving refuses to load a version with more
_VERSION = re.compile(r"^[0-9]+$")


def versions(model_dir: Path | str) -> list[int]:
    """The published integer versions under `model_dir`, ascending."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        return []
    return sorted(int(p.name) for p in model_dir.iterdir() if p.is_dir() and _VERSION.match(p.name))


def publish(write, model_dir: Path | str, *, version: int | None = None, keep: int | None = None) -> Path:
    """Runs `write(tmp_dir)` and renames the result to the next version directory.

    Args:
        write: a function that writes a complete SavedModel into the directory it is given
            (which does not exist yet).
        model_dir: `<base>/<name>`.
        version: an explicit version; by default the highest existing one plus 1.
        keep: if set, remove all but the newest `keep` versions afterwards.

    Returns:
        The published version directory.
    """
    model_dir = ensure_dir(model_dir)
    if version is not None and (not isinstance(version, int) or version < 1):
        raise ValueError(f"version must be a positive integer. Received: version={version!r}")
    if keep is not None and (not isinstance(keep, int) or keep < 1):
        raise ValueError(f"keep must be >= 1. Received: keep={keep!r}")
    for _ in range(100):  # another writer may take the same number; then try the next
        target = model_dir / str(version if version is not None else (max(versions(model_dir), default=0) + 1))
        try:
            with atomic_dir(target) as tmp:
                os.rmdir(tmp)  # the writers below want to create the directory themselves
                write(tmp)
            break
        except FileExistsError:
            if version is not None:
                raise FileExistsError(f"Version {version} already exists in {model_dir}.") from None
    else:
        raise RuntimeError(f"Could not find a free version number in {model_dir}.")
    if keep is not None:
        prune(model_dir, keep)
    _remove_stale_tmp(model_dir)
    return target


def prune(model_dir: Path | str, keep: int) -> list[int]:
    """Removes all but the newest `keep` versions; returns the removed ones.

    Each is first renamed to a temporary name, so a server polling the directory
    never sees a half-deleted version.
    """
    if not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be >= 1. Received: keep={keep!r}")
    model_dir = Path(model_dir)
    removed = versions(model_dir)[:-keep]
    for old in removed:
        doomed = model_dir / f"{TMP_PREFIX}removed-{old}-{os.getpid()}"
        os.rename(model_dir / str(old), doomed)
        shutil.rmtree(doomed)
    return removed


def _remove_stale_tmp(model_dir: Path, max_age_s: float = 3600) -> None:
    """Removes temporary directories that crashed writers (SIGKILL, power loss) left behind.

    Only ones older than `max_age_s`, so a concurrent writer's work in progress is kept.
    """
    cutoff = time.time() - max_age_s
    for p in model_dir.iterdir():
        try:
            if p.name.startswith(TMP_PREFIX) and p.is_dir() and p.stat().st_mtime < cutoff:
                shutil.rmtree(p, ignore_errors=True)
        except FileNotFoundError:  # removed by someone else meanwhile
            pass


# ----------------------------------------------------------------------------- warmup records


def predict_requests(samples: dict[str, np.ndarray], model_name: str, *, num_records: int = 10,
                     signature_name: str = SERVING_SIGNATURE) -> list:
    """One single-example `PredictRequest` per sample, for the first `num_records` samples."""
    if not samples:
        raise ValueError("Warmup needs at least one input. Received: samples={}")
    lengths = {k: len(v) for k, v in samples.items()}
    if len(set(lengths.values())) != 1 or not next(iter(lengths.values())):
        raise ValueError(f"Warmup inputs must be non-empty and of one length. Received lengths: {lengths}")
    if not 1 <= num_records <= MAX_RECORDS:
        raise ValueError(f"num_records must be in [1, {MAX_RECORDS}]. Received: num_records={num_records}")
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    requests = []
    for i in range(min(num_records, next(iter(lengths.values())))):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model_name
        request.model_spec.signature_name = signature_name
        for name, values in samples.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(values[i : i + 1])))
        requests.append(request)
    return requests


def write_warmup(version_dir: Path | str, requests: list) -> Path:
    """Writes `requests` (`PredictRequest`s) as PredictionLog records into `<version_dir>/assets.extra/`."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = Path(version_dir) / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for request in requests:
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path


def read_warmup(version_dir: Path | str) -> list:
    """The PredictionLog records of a version; empty if it has none."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = Path(version_dir) / WARMUP_FILE
    if not path.is_file():
        return []
    logs = []
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        logs.append(prediction_log_pb2.PredictionLog.FromString(record))
    return logs


def model_samples(model, data, num_records: int = 10) -> dict[str, np.ndarray]:
    """`{input_name: first num_records examples}` of `data` for a Keras model's signature.

    `data` is model input (an array, a list of arrays or a dict keyed by input name), or a
    tf.data of `(x, y)` or `x` batches, of which only the first batches are read.
    """
    import tensorflow as tf

    from zoo.deploy.formats.trace import signature_of

    specs = signature_of(model).specs()
    if isinstance(data, tf.data.Dataset):
        batches, taken = [], 0
        for batch in data:
            x = batch[0] if isinstance(batch, tuple) else batch
            batches.append(tf.nest.map_structure(np.asarray, x))
            taken += len(tf.nest.flatten(batches[-1])[0])
            if taken >= num_records:
                break
        if not batches:
            raise ValueError("Warmup data is an empty dataset.")
        data = tf.nest.map_structure(lambda *xs: np.concatenate(xs), *batches)
    if isinstance(data, dict):
        missing = sorted({s.name for s in specs} - set(data))
        if missing:
            raise ValueError(f"Warmup data has keys {sorted(data)}; the model's inputs {missing} are missing.")
        columns = [data[s.name] for s in specs]
    elif isinstance(data, (list, tuple)) and len(specs) > 1:
        columns = list(data)
    else:
        columns = [data]
    if len(columns) != len(specs):
        raise ValueError(f"Warmup data has {len(columns)} inputs; the model has {len(specs)}: "
                         f"{[s.name for s in specs]}.")
    return {s.name: np.asarray(c)[:num_records].astype(s.dtype.as_numpy_dtype, copy=False)
            for s, c in zip(specs, columns)}
