"""ONNX conversion around onnxruntime's PadFusion (`zoo.deploy.formats.onnx_convert`, point 4): a zero
`Pad` before a `MaxPool` must still pad with zeros in a default onnxruntime session.

The reference is numpy: pad with zeros, then take each window's max; and Keras itself for the export.
"""

import keras
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import zoo.deploy.export
import zoo.deploy.formats.onnx_convert
from zoo.deploy.export import ExportData
from zoo.deploy.formats.onnx_convert import guard_zero_pads


def _zero_pad_max_pool(x, pad: int, k: int, s: int) -> np.ndarray:
    """NCHW: zero padding on H and W, then a k x k max pool of stride s, in plain numpy."""
    p = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = (p.shape[2] - k) // s + 1, (p.shape[3] - k) // s + 1
    return np.stack([np.stack([p[:, :, i * s:i * s + k, j * s:j * s + k].max(axis=(2, 3)) for j in range(out[1])], -1)
                     for i in range(out[0])], -2)


def _pad_pool_model(opset: int) -> onnx.ModelProto:
    """x -> Pad(zeros, 1 on H and W; no constant_value input, as tf2onnx writes it) -> MaxPool 3x3/2."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    nodes = [helper.make_node("Pad", ["x", "pads"], ["padded"], name="pool_pad", mode="constant"),
             helper.make_node("MaxPool", ["padded"], ["y"], name="pool", kernel_shape=[3, 3], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [pads])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _run(proto, x):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])  # default: optimized
    return session.run(None, {"x": x})[0]


def test_zero_pad_before_max_pool_keeps_its_zeros_in_onnxruntime():
    x = -np.random.default_rng(0).random((2, 2, 6, 6), dtype=np.float32)  # all negative: every border max is a pad 0
    expected = _zero_pad_max_pool(x, 1, 3, 2)
    assert (expected[:, :, 0, :] == 0).all()
    for opset in (13, 18):
        proto = _pad_pool_model(opset)
        assert np.abs(_run(proto, x) - expected).max() > 0.1  # onnxruntime's PadFusion, unguarded
        assert guard_zero_pads(proto) == ["pool_pad"]
        np.testing.assert_array_equal(_run(proto, x), expected)


def test_resnet_v2_stem_exports_to_onnx_within_float_tolerance(tmp_path):
    """ResNetV2's stem: a linear convolution (signed output), ZeroPadding2D(1), MaxPooling2D(3, 2)."""
    keras.utils.set_random_seed(0)
    image = keras.Input((16, 16, 3), name="image")
    x = keras.layers.Conv2D(4, 3, strides=2, padding="same", name="conv1")(image)
    x = keras.layers.MaxPooling2D(3, strides=2, name="pool1")(keras.layers.ZeroPadding2D(1, name="pool1_pad")(x))
    model = keras.Model(image, keras.layers.Flatten(name="features")(x))
    x = np.random.default_rng(1).normal(size=(8, 16, 16, 3)).astype(np.float32)
    report = zoo.deploy.export.export(model, tmp_path, ["onnx"], data=ExportData(test=x), latency_runs=0, isolate=False)
    (result,) = report.results
    assert result.status == "passed", result.error
    assert any("PadFusion" in n for n in result.notes), result.notes
    session = ort.InferenceSession(result.path, providers=["CPUExecutionProvider"])
    out = session.run(None, {"image": x})[0]
    np.testing.assert_allclose(out, model(x).numpy(), atol=1e-5)


def test_the_external_data_route_keeps_the_weights_beside_the_model_and_runs_in_onnxruntime(tmp_path):
    """tf2onnx's large-model route, forced on a small model: the .onnx holds no weight over 1024 elements, its
    `.onnx.data` file holds them, and onnxruntime, the metadata and the scan read the pair."""
    from zoo.deploy.formats import onnx as onnx_format
    from zoo.deploy.scan import scan

    keras.utils.set_random_seed(0)
    image = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Conv2D(16, 3, activation="relu", name="conv")(image)
    x = keras.layers.Dense(64, activation="gelu", name="hidden")(keras.layers.Flatten()(x))  # 576 x 64 weights
    model = keras.Model(image, keras.layers.Dense(10, activation="softmax", name="predictions")(x))
    x = np.random.default_rng(2).random((16, 8, 8, 3), dtype=np.float32)
    report = zoo.deploy.export.export(model, tmp_path, ["onnx"], data=ExportData(test=x), latency_runs=0,
                                      isolate=False, external_data=True, class_names=list("abcdefghij"))
    (result,) = report.results
    assert result.status == "passed", result.error
    path = tmp_path / f"{model.name}_float32.onnx"
    data = onnx_format.data_file(path)
    large = sum(int(np.prod(v.shape)) * 4 for v in model.weights if np.prod(v.shape) > 1024)  # tf2onnx's cut
    assert large == 576 * 64 * 4 and large <= data.stat().st_size < large + 4096 and path.stat().st_size < large / 10
    assert result.size_bytes == path.stat().st_size + data.stat().st_size
    proto = onnx.load(str(path), load_external_data=False)
    external = [t for t in proto.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    assert {e.value for t in external for e in t.external_data if e.key == "location"} == {data.name}
    assert sum(np.prod(t.dims) for t in external) == 576 * 64
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"image": x})[0], model(x).numpy(), atol=1e-5)
    assert '"j"' in onnx_format.read_metadata(path)  # written after conversion, the external references kept
    assert not scan(path).findings  # the data file is inside the model's folder


def test_the_route_is_chosen_by_size():
    from zoo.deploy.formats.memory import PROTOBUF_LIMIT, use_external_data

    assert use_external_data(None, 10**6) == (False, None)
    assert use_external_data(None, 10**6, threshold=10**5)[0]  # a lowered threshold
    assert use_external_data(None, PROTOBUF_LIMIT)[0]  # past protobuf's limit: the only route
    assert use_external_data(False, PROTOBUF_LIMIT) == (False, None)  # asked for: as asked
