"""Quantization-aware training (issue 16): fake quantization against a numpy reference, BatchNorm
folding against Keras' own layers, and the int8 TFLite the trained model converts to."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
import zoo.deploy.export
from zoo.deploy.export import ExportData
from zoo.quantization import QuantizationError, QuantizedLinear, calibrate, quantize_model
from zoo.quantization.fake_quant import (
    activation_scale_and_zero_point,
    fake_quant_per_channel,
    fake_quant_per_tensor,
    fake_quant_symmetric,
)
from zoo.training import ZooModel, features as F


# -- numpy references: the int8 specification written out, not the code under test ---------------------
def ref_symmetric(w, axis=None):
    """Symmetric narrow-range int8: scale = max|w| / 127 per channel (axis) or per tensor, round half away."""
    w = np.asarray(w, np.float64)
    bound = np.max(np.abs(w), axis=tuple(i for i in range(w.ndim) if i != axis % w.ndim) if axis is not None else None,
                   keepdims=True)
    scale = bound / 127.0
    q = np.clip(np.sign(w) * np.floor(np.abs(w) / scale + 0.5), -127, 127)
    return q * scale


def ref_asymmetric(x, lo, hi):
    """Asymmetric 8-bit with the zero point rounded onto the grid (Jacob et al. 2018, Section 2.1)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0
    zero = np.clip(np.floor(-lo / scale + 0.5), 0, 255)
    q = np.clip(np.floor(np.asarray(x, np.float64) / scale + 0.5) + zero, 0, 255)
    return (q - zero) * scale, scale


def test_weight_fake_quant_per_channel_matches_reference():
    rng = np.random.default_rng(0)
    w = (rng.normal(size=(3, 3, 4, 6)) * np.geomspace(0.01, 10, 6)).astype(np.float32)  # ranges 1000x apart
    got = fake_quant_per_channel(w).numpy()
    want = ref_symmetric(w, axis=-1)
    step = np.max(np.abs(w), axis=(0, 1, 2)) / 127
    assert np.all(np.abs(got - want) <= 1e-5 * step)
    assert len(np.unique(np.round(got[..., 0] / step[0]))) <= 255  # on the channel's own grid
    # Along another axis (e.g. a kernel stored (out, in)): the same numbers, transposed.
    got0 = fake_quant_per_channel(np.moveaxis(w, -1, 0), axis=0).numpy()
    np.testing.assert_allclose(np.moveaxis(got0, 0, -1), got, rtol=0, atol=1e-6)


def test_dense_weights_fake_quant_per_tensor_matches_reference():
    w = np.random.default_rng(1).normal(size=(20, 7)).astype(np.float32)
    np.testing.assert_allclose(fake_quant_symmetric(w).numpy(), ref_symmetric(w), rtol=0, atol=1e-6)


@pytest.mark.parametrize("lo, hi", [(-0.37, 2.1), (0.0, 6.0), (-5.0, -1.0), (0.3, 0.9)])
def test_activation_fake_quant_matches_reference(lo, hi):
    x = np.linspace(lo - 1, hi + 1, 2001).astype(np.float32)
    got = fake_quant_per_tensor(x, lo, hi).numpy()
    want, scale = ref_asymmetric(x, lo, hi)
    differ = np.abs(got - want) > 1e-5 * (hi - lo + 1)
    # Only where float32 and float64 round a value within float32 precision of a half step differently.
    frac = np.abs(x[differ] / scale - np.floor(x[differ] / scale) - 0.5)
    assert np.all(frac < 1e-4) and np.all(np.abs(got - want)[differ] <= scale * 1.0001), x[differ]
    assert 0.0 in got  # zero is exactly representable
    s, z = activation_scale_and_zero_point(lo, hi)
    assert s == pytest.approx(scale, rel=1e-6)
    np.testing.assert_allclose(got, (np.clip(np.floor(x / s + 0.5) + z, -128, 127) - z) * s, atol=1e-5 * (hi - lo + 1))


def test_activation_gradient_is_straight_through():
    x = tf.constant([-2.0, -0.5, 0.0, 0.7, 3.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(fake_quant_per_tensor(x, -1.0, 1.0))
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0, 1, 1, 1, 0])


# -- BatchNorm folding, against Keras' Conv2D and BatchNormalization ------------------------------------
def _conv_bn(kind="Conv2D"):
    rng = np.random.default_rng(2)
    if kind == "Conv2D":
        conv = keras.layers.Conv2D(5, 3, padding="same", use_bias=True, name="conv")
    else:
        conv = keras.layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same", name="conv")
    bn = keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-3, name="bn")
    x = rng.random((8, 6, 6, 3), dtype=np.float32)
    y = bn(conv(x))
    n = y.shape[-1]
    bn.set_weights([rng.uniform(0.2, 3, n), rng.normal(size=n), rng.normal(size=n), rng.uniform(0.1, 4, n)])
    return conv, bn, x


@pytest.mark.parametrize("kind", ["Conv2D", "DepthwiseConv2D"])
def test_folded_inference_equals_conv_with_folded_quantized_weights(kind):
    conv, bn, x = _conv_bn(kind)
    q = QuantizedLinear(keras.layers.serialize(conv), keras.layers.serialize(bn))
    q.build(x.shape)
    q.inner.set_weights(conv.get_weights())
    q.batch_norm.set_weights(bn.get_weights())
    gamma, beta, mean, var = (w.astype(np.float64) for w in bn.get_weights())
    kernel, bias = (w.astype(np.float64) for w in conv.get_weights())
    sigma = np.sqrt(var + bn.epsilon)
    channel_scale = (gamma / sigma).reshape(kernel.shape[-2:]) if kind != "Conv2D" else gamma / sigma
    folded = kernel * channel_scale
    axis_shape = (*folded.shape[:-2], -1) if kind != "Conv2D" else folded.shape
    quantized = ref_symmetric(folded.reshape(axis_shape), axis=-1).reshape(folded.shape)
    reference = type(conv).from_config(conv.get_config())
    reference.build(x.shape)
    reference.set_weights([quantized.astype(np.float32), (beta + (bias - mean) * gamma / sigma).astype(np.float32)])
    np.testing.assert_allclose(q(x, training=False).numpy(), reference(x).numpy(), atol=1e-4)
    # Folding is exact in float: without the rounding it is Conv -> BatchNormalization (inference).
    unquantized = bn(conv(x), training=False).numpy()
    assert np.max(np.abs(q(x, training=False).numpy() - unquantized)) < 0.05 * np.ptp(unquantized)


def test_training_normalizes_with_batch_statistics_and_updates_moving_ones_like_keras():
    conv, bn, x = _conv_bn()
    q = QuantizedLinear(keras.layers.serialize(conv), keras.layers.serialize(bn))
    q.build(x.shape)
    q.inner.set_weights(conv.get_weights())
    q.batch_norm.set_weights(bn.get_weights())
    keras_train = bn(conv(x), training=True).numpy()  # also updates bn's moving statistics
    ours = q(x, training=True).numpy()
    assert np.max(np.abs(ours - keras_train)) < 0.05 * np.ptp(keras_train)  # only the weight rounding differs
    for got, want in zip(q.batch_norm.get_weights()[2:], bn.get_weights()[2:]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- the rewrite and its int8 deployment ------------------------------------------------------------------
def _tiny(logits=True):
    keras.utils.set_random_seed(0)
    return zoo.build("convnet_bn", input_shape=(16, 16, 1), num_classes=4, filters=(4, 8), dropout=0.0,
                     classifier_activation=None if logits else "softmax")


def _data(n=256):
    rng = np.random.default_rng(3)
    x = rng.random((n, 16, 16, 1), dtype=np.float32)
    y = (x[:, :8].mean((1, 2, 3)) > x[:, 8:].mean((1, 2, 3))).astype("int32") + 2 * (x[:, :, :8].mean((1, 2, 3)) > 0.5)
    return x, y.astype("int32")


def _qat_trained(steps=16):
    x, y = _data()
    qat = F.QuantizationAware(freeze_bn_after=steps // 2)
    model = qat.prepare_model(_tiny())
    model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False, features=[qat])
    model.fit(x, y, batch_size=32, epochs=steps * 32 // len(x), verbose=0)
    return model, x, y


def test_rewrite_places_quantizers_where_the_converter_writes_int8_tensors():
    model = quantize_model(_tiny())
    kinds = [(layer.name, type(layer).__name__) for layer in model.layers]
    assert ("stage1_conv", "QuantizedLinear") in kinds and ("head_dense", "QuantizedLinear") in kinds
    assert not any(k == "BatchNormalization" for _, k in kinds)  # folded into the convs
    quantized = {layer.name[: -len("_quant")] for layer in model.layers if layer.name.endswith("_quant")}
    # After the input, after each fused ReLU (not between conv and ReLU), after the logits; none after pooling.
    assert quantized == {"image", "stage1_relu", "stage2_relu", "head_dense"}


def test_unsupported_layers_are_named():
    inputs = keras.Input((5, 3))
    model = ZooModel(inputs, keras.layers.Dense(2)(keras.layers.LSTM(4, name="lstm")(inputs)))
    with pytest.raises(QuantizationError, match="'lstm' \\(LSTM\\) has weights"):
        quantize_model(model)


def test_bn_statistics_freeze_after_the_given_step():
    model, x, y = _qat_trained(steps=16)
    layer = model.get_layer("stage1_conv")
    assert float(layer.bn_frozen.numpy()) == 1.0
    before = [w.copy() for w in layer.batch_norm.get_weights()[2:]]
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    for b, a in zip(before, layer.batch_norm.get_weights()[2:]):
        np.testing.assert_array_equal(a, b)


def test_qat_model_round_trips_and_converts_to_builtin_int8_tflite_agreeing_within_one_step(tmp_path):
    model, x, y = _qat_trained()
    model.save(tmp_path / "qat.keras")
    loaded = keras.saving.load_model(tmp_path / "qat.keras")
    np.testing.assert_array_equal(loaded.predict(x[:64], verbose=0), model.predict(x[:64], verbose=0))

    report = zoo.deploy.export.export(tmp_path / "qat.keras", tmp_path / "out", ["tflite"], precision="int8",
                               data=ExportData(test=(x, y)), latency_runs=0,
                               isolate=False)  # no calibration data: the ranges are learned
    assert report.ok, report.table()
    path = report.results[0].path
    from zoo.deploy.formats.tflite_convert import float_ops
    from zoo.deploy.formats.tflite_runner import TFLiteRunner

    flatbuffer = open(path, "rb").read()
    assert float_ops(flatbuffer) == []
    from ai_edge_litert.interpreter import Interpreter

    ops = {op["op_name"] for op in Interpreter(model_content=flatbuffer)._get_ops_details()}
    assert ops <= {"QUANTIZE", "DEQUANTIZE", "CONV_2D", "MAX_POOL_2D", "RESHAPE", "FULLY_CONNECTED", "SHAPE",
                   "STRIDED_SLICE", "PACK"}, ops
    out = TFLiteRunner(path).predict(x)["predictions"]
    keras_out = model.predict(x, verbose=0)
    step, _ = activation_scale_and_zero_point(*(float(v) for v in (model.get_layer("head_dense_quant").minimum,
                                                                    model.get_layer("head_dense_quant").maximum)))
    diff = np.abs(out - keras_out) / step
    assert diff.max() <= 1.001, diff.max()  # measured: 1.0000 (every output within one step)
    assert np.mean(out.argmax(-1) == keras_out.argmax(-1)) >= 0.99


def test_calibrate_sets_ranges_from_data():
    model = quantize_model(_tiny())
    x, _ = _data(64)
    assert calibrate(model, [x[:32], x[32:]]) == 64
    q = model.get_layer("image_quant")
    assert float(q.minimum.numpy()) == pytest.approx(float(x.min())) and float(q.maximum.numpy()) == pytest.approx(float(x.max()))
