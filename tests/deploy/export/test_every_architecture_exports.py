"""Every architecture in the zoo exports to every format and runs there (issue 5).

Iterates the registry, so an architecture is covered the moment it is
registered. Small inputs (images above 64 px at 32 px), untrained weights,
random inputs, float32 parity, no latency: conversion and runtime support is
what is checked here. `benchmarks/export_matrix.py` records the same matrix for
`zoo list` (zoo/deploy/export/export_matrix.json).
"""

import fnmatch
import os
import re

import pytest

import zoo
from tests.conftest import params_marking_variants_slow
from zoo.deploy.export import matrix

# Where a format genuinely cannot take an architecture: (name pattern, format) -> the upstream error
# it fails with, so that a fix upstream (or a new failure) shows up here.
KNOWN_UNSUPPORTED = {
    # None at present. tfjs 4.22 cannot run RNN layers that return sequences (char_lstm_lm,
    # lstm_forecaster) with control flow v2; the tfjs format falls back to its unrolled route there.
}


def known_failure(name, fmt):
    return next((why for (pattern, f), why in KNOWN_UNSUPPORTED.items()
                 if f == fmt and fnmatch.fnmatchcase(name, pattern)), None)


# The ImageNet-size families' first members take 1.5-3 minutes each here (5 formats, 2 cores): a third of
# the suite. Their layers' ops are exported in the default run by smaller models (mobilenet_v2's blocks,
# convnet_bn; ConvNeXt's GELU and grouped conv and EfficientNet's Normalization in
# tests/deploy/export/test_user_models.py), and all of them by `-m slow` and `benchmarks/export_matrix.py`.
# Also left to `-m slow`: models whose layers the default run exports in every format elsewhere - mobilenet_v2
# (17 inverted residual blocks, 45 s: three of its own blocks below make every one of its layer classes),
# lstm_classifier in every format and precision in tests/deploy/export/test_parity.py, MobileNetV3 (its hard swish
# in test_user_models.py, the rest in mobilenet_v2), vgg8_bn (convnet_bn's convolution, batch norm and
# pooling), char_lstm_lm (its sequence-returning LSTM in lstm_forecaster here, its TF.js route in
# test_parity.py), resnet20 (its convolutions, batch norm and pooling in convnet_bn in test_parity.py, its residual Add
# in mobilenet_v2's blocks below), simple_rnn_classifier (the RNN layer's conversion routes in gru_classifier,
# lstm_forecaster and bilstm_text_classifier here; suite time, issue 39: 18 s and 8 s of the 2-core suite).
HEAVY = {"convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_b0", "vgg16", "resnet18", "mixer_s32",
         "lstm_classifier", "mobilenet_v3_small", "vgg8_bn", "char_lstm_lm", "mobilenet_v2", "resnet20",
         "simple_rnn_classifier"}


def _params():
    return [pytest.param(*p.values, marks=(*p.marks, *([pytest.mark.slow] if p.values[0] in HEAVY else [])))
            for p in params_marking_variants_slow(zoo.list_models())]


@pytest.fixture(scope="module")
def process(_one_conversion_process):
    """The session's conversion process (tests/conftest.py), not one more TensorFlow start for this file."""
    return _one_conversion_process


@pytest.mark.skipif(os.environ.get("ZOO_SKIP_EXPORT_MATRIX") == "1", reason="ZOO_SKIP_EXPORT_MATRIX=1")
@pytest.mark.parametrize("name", _params())
def test_every_architecture_exports_to_every_format(name, tmp_path, monkeypatch, process):
    from zoo.deploy.formats import inputs

    monkeypatch.setattr(inputs, "RANDOM_EVAL_SAMPLES", 8)
    (row,) = matrix.export_matrix(tmp_path, [name], progress=None, process=process).values()
    problems = []
    for fmt, r in row.items():
        why = known_failure(name, fmt)
        if why is None and r["status"] != "passed":
            problems.append(f"{fmt}: {r['status']}: {r.get('error')}")
        elif why is not None and r["status"] != "passed" and not re.search(why, r.get("error", ""), re.S):
            problems.append(f"{fmt}: known to fail with {why!r}, but failed otherwise: {r.get('error')}")
    assert not problems, "\n".join(problems)


def test_mobilenet_v2s_blocks_export_to_every_format(tmp_path, monkeypatch, process):
    """MobileNetV2's stem and its three kinds of inverted residual block (`mobilenet.inverted_residual_block`:
    expanded with a stride of 2, so zero-padded into a valid depthwise convolution; expanded with the residual
    Add; unexpanded): every layer class of mobilenet_v2, which goes to `-m slow` here, in every format."""
    import keras

    from zoo.architectures.batch_norm import BatchNormalization
    from zoo.architectures.conv2d import Conv2D
    from zoo.architectures.mobilenet import inverted_residual_block
    from zoo.deploy.export.exporter import export
    from zoo.deploy.formats import inputs

    monkeypatch.setattr(inputs, "RANDOM_EVAL_SAMPLES", 8)
    keras.utils.set_random_seed(0)
    image = keras.Input((32, 32, 3), name="image")
    x = Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="Conv1")(image)
    x = keras.layers.ReLU(6.0, name="Conv1_relu")(BatchNormalization(epsilon=1e-3, name="bn_Conv1")(x))
    x = inverted_residual_block(x, 1, 1, 16, "expanded_conv_")
    x = inverted_residual_block(x, 6, 2, 24, "block_1_")
    x = inverted_residual_block(x, 6, 1, 24, "block_2_")
    x = keras.layers.Dense(10, name="logits")(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(image, keras.layers.Activation("softmax", name="predictions")(x), name="mobilenet_v2_blocks")
    assert {type(layer) for layer in model.layers} == {type(layer) for layer in zoo.build(
        "mobilenet_v2", input_shape=(32, 32, 3), num_classes=10).layers}
    report = export(model, tmp_path, matrix.DEFAULT_FORMATS, latency_runs=0, process=process)
    assert report.ok and len(report.results) == len(matrix.DEFAULT_FORMATS), report.table()


def test_zoo_list_shows_the_recorded_export_matrix():
    results = {"a": {"saved_model": {"status": "passed"}, "tflite": {"status": "passed"},
                     "tfjs": {"status": "export_failed"}, "onnx": {"status": "passed"}}}
    assert matrix.exports_cell("a", results) == "sm,tflite,!tfjs,onnx"
    assert matrix.exports_cell("never_run", results) == "?"
