"""Warmup records: `assets.extra/tf_serving_warmup_requests` in a SavedModel version.

TF Serving replays them when it loads a version, before marking it AVAILABLE,
so the first real request does not pay for graph tracing and memory allocation.
The file is a TFRecord of `tensorflow.serving.PredictionLog` protos
(`tensorflow_serving/apis/prediction_log.proto`), at most 1000 records
(TF Serving guide "SavedModel Warmup", https://www.tensorflow.org/tfx/serving/saved_model_warmup).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

from zoo.formats.signature import SERVING_SIGNATURE, input_specs

WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_RECORDS = 1000  # TF Serving refuses to load a version with more


def predict_requests(samples: dict[str, np.ndarray], model_name: str, *, num_records: int = 10,
                     signature_name: str = SERVING_SIGNATURE) -> list[predict_pb2.PredictRequest]:
    """One single-example `PredictRequest` per sample, for the first `num_records` samples."""
    if not samples:
        raise ValueError("Warmup needs at least one input. Received: samples={}")
    lengths = {k: len(v) for k, v in samples.items()}
    if len(set(lengths.values())) != 1 or not next(iter(lengths.values())):
        raise ValueError(f"Warmup inputs must be non-empty and of one length. Received lengths: {lengths}")
    if not 1 <= num_records <= MAX_RECORDS:
        raise ValueError(f"num_records must be in [1, {MAX_RECORDS}]. Received: num_records={num_records}")
    requests = []
    for i in range(min(num_records, next(iter(lengths.values())))):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model_name
        request.model_spec.signature_name = signature_name
        for name, values in samples.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(values[i : i + 1])))
        requests.append(request)
    return requests


def write_warmup(version_dir: Path | str, requests: list[predict_pb2.PredictRequest]) -> Path:
    """Writes `requests` as PredictionLog records into `<version_dir>/assets.extra/`."""
    path = Path(version_dir) / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for request in requests:
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path


def read_warmup(version_dir: Path | str) -> list[prediction_log_pb2.PredictionLog]:
    """The PredictionLog records of a version; empty if it has none."""
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
    specs = input_specs(model)
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
