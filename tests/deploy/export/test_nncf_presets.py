"""The NNCF settings OpenVINO recommends, read from real OpenVINO graphs (`zoo.deploy.formats.ptq.nncf_presets`)."""

import importlib.util

import keras
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("openvino") is None or importlib.util.find_spec("nncf") is None,
                                reason="openvino/nncf not installed (pip install 'zoo[openvino]')")


def _graph(tmp_path, body):
    import openvino as ov

    from zoo.deploy.formats.openvino import decline_telemetry

    decline_telemetry()  # as zoo converts
    inputs = keras.Input((8, 16), name="x")
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(body(inputs))))
    model.export(str(tmp_path / "saved_model"), verbose=False)
    return ov.convert_model(str(tmp_path / "saved_model"))


@pytest.mark.parametrize("body, preset, transformer", [
    (lambda x: keras.layers.Dense(16, activation="relu")(x), None, False),
    (lambda x: keras.layers.Dense(16, activation="gelu")(x), "mixed", False),
    (lambda x: keras.layers.MultiHeadAttention(2, 8)(x, x), "mixed", True),
])
def test_preset_model_type_and_calibration_follow_the_graph(tmp_path, body, preset, transformer):
    """The preset and model type follow the activations; global min/max activation ranges and NNCF's full
    BiasCorrection (`nncf_presets.CALIBRATION`) reach both nncf.quantize and quantize_with_accuracy_control,
    except for transformers, which keep NNCF's own calibration."""
    from nncf.quantization.range_estimator import RangeEstimatorParametersSet

    from zoo.deploy.formats.ptq.nncf_presets import recommended

    settings = recommended(_graph(tmp_path, body))
    assert (settings.preset, settings.transformer) == (preset, transformer), settings.reason
    for accuracy_control, key in ((False, "advanced_parameters"), (True, "advanced_quantization_parameters")):
        kwargs = settings.kwargs(accuracy_control)
        ranges = kwargs[key].activations_range_estimator_params
        if transformer:
            assert "fast_bias_correction" not in kwargs and ranges.max.aggregator_type is None, kwargs
        else:
            assert kwargs["fast_bias_correction"] is False and ranges == RangeEstimatorParametersSet.MINMAX, kwargs
    assert ("full bias correction" in settings.describe()) != transformer, settings.describe()


def test_each_weighted_op_is_named_by_its_keras_layer_though_the_ir_renames_convolutions(tmp_path):
    """`openvino_nncf.layers_by_order`: what the accuracy guard reports as kept float (`float_layers`)."""
    import openvino as ov

    from zoo.deploy.formats.openvino import decline_telemetry
    from zoo.deploy.formats.ptq.openvino_nncf import WEIGHTED_OPS, layers_by_order

    def model(pointwise_filters):
        keras.utils.set_random_seed(0)
        image = keras.Input((16, 16, 3), name="image")
        x = keras.layers.Conv2D(8, 3, padding="same", name="stem_conv")(image)
        x = keras.layers.ReLU(name="stem_relu")(keras.layers.BatchNormalization(name="stem_bn")(x))
        x = keras.layers.Conv2D(pointwise_filters, 1, name="pw")(keras.layers.DepthwiseConv2D(3, name="dw")(x))
        return keras.Model(image, keras.layers.Dense(4, name="head")(keras.layers.GlobalAveragePooling2D()(x)))

    keras_model = model(16)
    keras_model.export(str(tmp_path / "saved_model"), verbose=False)
    decline_telemetry()
    ir = ov.convert_model(str(tmp_path / "saved_model"))
    ops = [op for op in ir.get_ordered_ops() if op.get_type_name() in WEIGHTED_OPS]
    assert [op.get_type_name() for op in ops] == ["Convolution", "GroupConvolution", "Convolution", "MatMul"]
    assert not any(name in ops[0].get_friendly_name() for name in ("stem", "pw"))  # named after a transpose
    found = layers_by_order(ir, keras_model)
    assert [found[op.get_friendly_name()] for op in ops] == ["stem_conv", "dw", "pw", "head"]
    assert layers_by_order(ir, model(32)) == {}  # the same layers with other weights' shapes: no guess


def test_openvino_conversion_sends_no_telemetry_unless_the_user_opted_in(tmp_path, monkeypatch):
    """`openvino.decline_telemetry`: without it, `convert_model` posts events (one per op type of this graph),
    each from a fork of the converting process; where the user opted in, it is left as ovc made it."""
    import openvino  # noqa: F401  (its import sends an event of its own, before zoo can decline)
    from openvino_telemetry import Telemetry
    from openvino_telemetry.utils import sender
    from openvino_telemetry.utils.opt_in_checker import ConsentCheckResult, OptInChecker

    from zoo.deploy.formats.openvino import decline_telemetry

    sent = []
    monkeypatch.setattr(sender.TelemetrySender, "send", lambda self, backend, message: sent.append(message))
    _graph(tmp_path, lambda x: keras.layers.Dense(16, activation="relu")(x))
    assert sent == []

    monkeypatch.setattr(OptInChecker, "check", lambda self, *args, **kwargs: ConsentCheckResult.ACCEPTED)
    telemetry = Telemetry()  # the process's one, made by convert_model above
    telemetry.consent = True
    try:
        decline_telemetry.__wrapped__()  # past the once-per-process cache
        assert telemetry.consent
    finally:
        telemetry.consent = False
