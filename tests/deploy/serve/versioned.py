"""Tiny SavedModels (a few KB) whose answer is their version, for the config, versions and fault tests.

`publish(model_dir, version)` copies a cached SavedModel answering `{"version": [[v], ...]}` (one
row per input row of "x", float32 [None, 1]) into `model_dir/<version>`, atomically (renamed into
place, as `zoo.deploy.formats.tf_serving.publish` does), so building costs one save per version
number per session.
"""

import os
import shutil
import tempfile
import threading
from pathlib import Path

import tensorflow as tf

from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE

_CACHE = Path(tempfile.mkdtemp(prefix="zoo-versioned-"))
_LOCK = threading.Lock()


def _build(version: int) -> Path:
    path = _CACHE / str(version)
    with _LOCK:
        if not path.is_dir():
            class Versioned(tf.Module):
                @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32, name="x")])
                def serve(self, x):
                    return {"version": x * 0.0 + float(version)}

            module = Versioned()
            tf.saved_model.save(module, str(path), signatures={SERVING_SIGNATURE: module.serve})
    return path


def publish(model_dir, version: int, *, warmup: bytes | None = None) -> Path:
    """Copies the version-`version` model into `model_dir/<version>`; `warmup`: raw warmup file bytes."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    tmp = model_dir / f".tmp-{version}"
    shutil.copytree(_build(version), tmp)
    if warmup is not None:
        (tmp / "assets.extra").mkdir(exist_ok=True)
        (tmp / "assets.extra" / "tf_serving_warmup_requests").write_bytes(warmup)
    final = model_dir / str(version)
    os.rename(tmp, final)
    return final


def bad_warmup() -> bytes:
    """A warmup file whose one PredictRequest names an input the model lacks: replaying it fails."""
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    record = prediction_log_pb2.PredictionLog()
    request = predict_pb2.PredictRequest()
    request.inputs["not_x"].CopyFrom(tf.make_tensor_proto([[1.0]]))
    record.predict_log.request.CopyFrom(request)
    out = Path(tempfile.mkdtemp()) / "w"
    with tf.io.TFRecordWriter(str(out)) as writer:
        writer.write(record.SerializeToString())
    return out.read_bytes()


def config_text(*models) -> str:
    """A models.config: `models` are (name, base_path, policy text, {label: version})."""
    parts = []
    for name, base, policy, labels in models:
        body = [f'name: "{name}"', f'base_path: "{base}"', 'model_platform: "tensorflow"']
        if policy:
            body.append(f"model_version_policy {{ {policy} }}")
        body += [f'version_labels {{ key: "{k}" value: {v} }}' for k, v in labels.items()]
        parts.append("config {\n  " + "\n  ".join(body) + "\n}")
    return "model_config_list {\n" + "\n".join(parts) + "\n}\n"


def write_atomic(path, text: str) -> None:
    from zoo.fileio import atomic_write_text

    atomic_write_text(Path(path), text)


def publish_onnx(model_dir, version: int) -> Path:
    """An ONNX version (`model.onnx`, opset 17, built with onnx.helper) answering like `publish`'s."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "zero"], ["x0"]), helper.make_node("Add", ["x0", "v"], ["version"])],
        "versioned", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])],
        [helper.make_tensor_value_info("version", TensorProto.FLOAT, ["N", 1])],
        [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
         helper.make_tensor("v", TensorProto.FLOAT, [], [float(version)])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model_dir = Path(model_dir)
    tmp = model_dir / f".tmp-{version}"
    tmp.mkdir(parents=True)
    onnx.save(model, str(tmp / "model.onnx"))
    final = model_dir / str(version)
    os.rename(tmp, final)
    return final


def publish_openvino(model_dir, version: int) -> Path:
    """An OpenVINO IR version (`model.xml` + `model.bin`), converted from `publish_onnx`'s model."""
    import openvino as ov

    model_dir = Path(model_dir)
    onnx_dir = publish_onnx(Path(tempfile.mkdtemp()) / "onnx", version)
    tmp = model_dir / f".tmp-{version}"
    tmp.mkdir(parents=True)
    ov.save_model(ov.convert_model(str(onnx_dir / "model.onnx")), str(tmp / "model.xml"))
    final = model_dir / str(version)
    os.rename(tmp, final)
    return final
