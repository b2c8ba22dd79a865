"""`zoo.deploy.export.check` and `zoo export --check` (issue 13): each verdict against the real converter.

The check answers from one trace without converting (TF.js's op lists, tf2onnx's handler registry)
or from one permissive conversion (TFLite). The references here are the converters run the way
`zoo export` runs them: TFLite with builtin ops only, tf2onnx's full conversion of the SavedModel.
"""

import json
import re

import keras
import numpy as np
import pytest

import zoo.deploy.export
import zoo.deploy.export.deployability
import zoo.deploy.formats
import zoo.deploy.formats.diagnose
import zoo.deploy.formats.model_io
import zoo.deploy.formats.onnx_convert
import zoo.deploy.formats.saved_model
import zoo.deploy.formats.trace
from zoo import cli
from zoo.deploy.export import deployability
from zoo.deploy.formats.diagnose import UnsupportedOpsError

FORMATS = ["saved_model", "tflite", "tfjs", "onnx"]


def _lstm():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((None, 8)), keras.layers.LSTM(16, name="encoder"),
                             keras.layers.Dense(3, activation="softmax", name="head")], name="lstm_model")


def _text_model(output_mode="int"):
    """TextVectorization in front: "int" ids zoo carries as data outside the graph; "tf_idf" it does not."""
    texts = np.array(["the cat sat", "a dog ran far", "the bird flew", "cats and dogs"])
    vectorize = keras.layers.TextVectorization(max_tokens=20, output_sequence_length=6 if output_mode == "int" else None,
                                               output_mode=output_mode, name="vectorize")
    vectorize.adapt(texts)
    text = keras.Input((1,), dtype="string", name="text")
    x = vectorize(text)
    if output_mode == "int":
        x = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(20, 4)(x))
    return keras.Model(text, keras.layers.Dense(2, name="logits")(x), name="text_model")


def _cnn():
    keras.utils.set_random_seed(0)
    image = keras.Input((16, 16, 3), name="image")
    x = keras.layers.Conv2D(8, 3, name="conv")(image)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.Activation(lambda t: keras.activations.gelu(t, approximate=False), name="gelu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(image, keras.layers.Dense(4, activation="softmax", name="predictions")(x), name="cnn")


def _builtins_only_error(model, batch_size=None) -> str:
    """The TFLite converter, builtin ops only, on the model's signature (dynamic or fixed batch): its error text."""
    import tensorflow as tf

    from zoo.deploy.formats.saved_model import serving_fn
    from zoo.deploy.formats.trace import signature_of

    signature = signature_of(model)
    function = tf.function(serving_fn(model, signature),
                           input_signature=signature.specs(batch_size)).get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        converter.convert()
    except Exception as e:  # the converter raises ConverterError
        return str(e)
    return ""


def _onnx_conversion_gaps(model, tmp_path) -> set:
    """The ops the real SavedModel -> ONNX conversion (`zoo export`'s) leaves unconverted; empty if it converts."""
    from zoo.deploy.formats.onnx_convert import convert_saved_model
    from zoo.deploy.formats.model_io import layer_classes
    from zoo.deploy.formats.saved_model import export_saved_model

    path = export_saved_model(model, tmp_path / "saved_model")
    try:
        convert_saved_model(str(path), 18, layer_classes(model))
    except UnsupportedOpsError as e:
        return set(e.ops)
    return set()


def test_lstm_with_a_dynamic_batch_needs_flex_ops_in_its_lstm_layer_and_the_batch_1_route_does_not():
    model = _lstm()
    report = zoo.deploy.export.check(model, FORMATS)
    tflite = report.result("tflite")
    # The dynamic-batch graph's gaps are named; zoo export's fixed_batch route converts with builtins.
    assert tflite.status == deployability.RUNS_VIA_ROUTE and report.ok and report.exit_code == 0
    assert "fixed_batch route" in tflite.route
    flagged = {g.op for g in tflite.gaps}
    assert {"TensorListReserve", "TensorListStack"} <= flagged, flagged
    assert all(g.layers == (("encoder", "LSTM"),) and g.needs for g in tflite.gaps), tflite.gaps
    # The reference: builtins only, the converter rejects the loop's TensorList ops.
    error = _builtins_only_error(model)
    rejected = set(re.findall(r"'tf\.(TensorList\w+)'", error))
    assert rejected and rejected <= flagged, (rejected, flagged)
    assert report.result("saved_model").ok and report.result("onnx").ok and report.result("tfjs").ok
    text = report.table()
    assert "TensorListReserve" in text and "'encoder' (LSTM)" in text and "Flex delegate" in text
    assert "tflite through zoo export's route" in text
    # The reference for the route: the converter, builtins only, on the batch-1 signature.
    assert _builtins_only_error(model, batch_size=1) == ""


def test_without_its_route_an_lstm_needs_flex_in_tflite(monkeypatch):
    from zoo.deploy.formats import tflite as tflite_format

    monkeypatch.setattr(tflite_format, "route_around", lambda traced: None)
    report = zoo.deploy.export.check(_lstm(), ["tflite"])
    assert report.result("tflite").status == deployability.NEEDS_RUNTIME and report.exit_code == 1
    assert "--allow-flex" in report.table() and "batch-1 graph" in report.table()


def test_a_carried_text_vectorization_runs_everywhere():
    report = zoo.deploy.export.check(_text_model(), FORMATS)
    assert report.ok, report.table()
    assert all("carried as data" in " ".join(r.notes) for r in report.results if r.format != "saved_model")


def test_string_splitting_is_flagged_for_onnx_as_the_real_conversion_fails(tmp_path):
    model = _text_model("tf_idf")  # not carried outside the graph: the formats meet the string ops
    report = zoo.deploy.export.check(model, FORMATS)
    onnx = report.result("onnx")
    flagged = {g.op for g in onnx.gaps}
    assert onnx.status == deployability.CANNOT_RUN and "StringSplitV2" in flagged
    assert {layer for g in onnx.gaps if g.op == "StringSplitV2" for layer in g.layers} == {
        ("vectorize", "TextVectorization")}
    assert "run that preprocessing outside the model" in onnx.advice
    assert flagged == _onnx_conversion_gaps(model, tmp_path)
    assert not report.result("tfjs").ok and not report.result("tflite").ok  # as test_user_models' export finds
    assert report.result("saved_model").ok


def test_a_cnn_with_exact_gelu_runs_everywhere_as_the_real_converters_agree(tmp_path):
    model = _cnn()
    report = zoo.deploy.export.check(model, FORMATS)
    assert report.ok and report.exit_code == 0, report.table()
    assert _builtins_only_error(model) == ""
    assert _onnx_conversion_gaps(model, tmp_path) == set()  # Erfc is rewritten before tf2onnx, as checked


@pytest.mark.skipif(bool(zoo.deploy.formats.FORMATS["openvino"].missing), reason="openvino not installed")
def test_openvino_names_the_lookup_its_frontend_cannot_convert():
    words = keras.Input((3,), dtype="string", name="words")
    ids = keras.layers.StringLookup(vocabulary=["a", "b", "c"], name="lookup")(words)
    x = keras.layers.Flatten()(keras.layers.Embedding(5, 4)(ids))
    model = keras.Model(words, keras.layers.Dense(2, name="logits")(x))
    report = zoo.deploy.export.check(model, ["tflite", "onnx", "openvino"])
    assert report.result("tflite").ok and report.result("onnx").ok  # both hold lookup tables (test_user_models)
    (gap,) = report.result("openvino").gaps
    assert gap.op == "LookupTableFindV2" and gap.layers == (("lookup", "StringLookup"),)


def test_cli_check_exit_codes_and_output(tmp_path, capsys):
    path = tmp_path / "lstm.keras"
    _lstm().save(path)
    assert cli.main(["export", "--check", str(path), "--formats", "saved_model,tflite,onnx",
                     "--out", str(tmp_path / "ci")]) == 0  # TFLite runs it through zoo export's batch-1 route
    out = capsys.readouterr().out
    assert "runs via route" in out and "TensorListReserve" in out and "'encoder' (LSTM)" in out
    assert sorted(p.name for p in (tmp_path / "ci").iterdir()) == ["check.json"]  # nothing converted
    written = json.loads((tmp_path / "ci" / "check.json").read_text())
    assert written["ok"] and written["results"][1]["status"] == "runs via route"
    text = tmp_path / "text.keras"
    _text_model("tf_idf").save(text)
    assert cli.main(["export", "--check", str(text), "--formats", "saved_model,onnx"]) == 1
    assert "StringSplitV2" in capsys.readouterr().out
    ok = tmp_path / "cnn.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="d")], name="mlp").save(ok)
    assert cli.main(["export", "--check", str(ok), "--formats", "tflite,onnx,tfjs"]) == 0
    assert "every format runs the model" in capsys.readouterr().out


def test_cli_check_bad_inputs_exit_2_with_clear_errors(tmp_path, capsys):
    assert cli.main(["export", "--check", "lenet"]) == 2
    assert "Did you mean: lenet5" in capsys.readouterr().err
    broken = tmp_path / "broken.keras"
    broken.write_bytes(b"not a zip")
    assert cli.main(["export", "--check", str(broken)]) == 2
    err = capsys.readouterr().err
    assert str(broken) in err and "not a zip" in err
    assert cli.main(["export", "--check", "lenet5", "--formats", "tflit"]) == 2
    assert "Did you mean: tflite" in capsys.readouterr().err
