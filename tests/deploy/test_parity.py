"""Parity of every format and TFLite precision with Keras, each in its real runtime (issue 5).

A small CNN and an LSTM classifier (time axis None), briefly trained on real
MNIST so that int8 argmax agreement is meaningful.
"""

import json

import keras
import numpy as np
import pytest

import zoo
import zoo.data
import zoo.deploy

ALL_TFLITE = ("float32", "float16", "dynamic_int8", "int8")
EVAL = 300


def _trained(name, dataset, steps, **kwargs):
    keras.utils.set_random_seed(0)
    model = zoo.build(name, **kwargs)
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=False)
    model.fit(zoo.data.load(dataset, "train", 128, seed=0).take(steps), epochs=1, verbose=0)
    return model


def _export(model, dataset, out, **kwargs):
    return zoo.deploy.export(
        model, out, quantization=ALL_TFLITE, weight_quantization=("float32", "uint8"),
        representative_data=zoo.data.load(dataset, "train", 100, seed=1), calibration_samples=300,
        test_data=zoo.data.load(dataset, "test", 1000), max_eval_samples=EVAL,
        data_description=f"{dataset} test split", **kwargs,
    )


def _check(report, out):
    failures = {f"{r['format']}[{r['variant']}]": r.get("error") for r in report.results if r["status"] != "passed"}
    assert not failures, report.table()
    assert report.ok
    labels = [(r["format"], r["variant"]) for r in report.results]
    assert labels == [("saved_model", None), *[("tflite", q) for q in ALL_TFLITE], ("tfjs", "float32"),
                      ("tfjs", "uint8"), ("onnx", None)]
    for r in report.results:
        assert list(r["output_shapes"]) == ["predictions"] and r["output_shapes"]["predictions"] == [EVAL, 10]
        assert r["eval_samples"] == EVAL and r["latency_runs"] >= 50 and r["latency_ms"] > 0
        assert r["size_bytes"] > 0
        if r["precision"] == "float32":
            assert r["max_abs_diff"] <= 1e-4
        elif r["precision"] == "float16":
            assert r["max_abs_diff"] <= 1e-2
        else:
            assert r["argmax_agreement"] >= 0.99
        assert abs(r["accuracy"] - report.keras["accuracy"]) <= 0.02
    # The report files: valid JSON and a Markdown model card next to the artifacts.
    data = json.loads((out / "report.json").read_text())
    assert data["ok"] and len(data["results"]) == len(report.results)
    card = (out / "report.md").read_text()
    assert card.startswith(f"# {report.model['name']}") and "## Per-format results" in card
    assert card.count("| passed |") == len(report.results)


@pytest.mark.usefixtures("real_mnist_dir")
def test_cnn_every_format_and_precision(tmp_path):
    model = _trained("convnet_bn", "mnist", 120)
    report = _export(model, "mnist", tmp_path)
    _check(report, tmp_path)
    assert report.keras["accuracy"] > 0.9
    assert (tmp_path / "saved_model" / "convnet_bn" / "1" / "saved_model.pb").is_file()
    assert (tmp_path / "convnet_bn_int8.tflite").is_file() and (tmp_path / "convnet_bn.onnx").is_file()
    assert (tmp_path / "tfjs_uint8" / "model.json").is_file()
    assert {r.get("route") for r in report.results if r["format"] == "tflite"} == {"dynamic_batch"}


@pytest.mark.usefixtures("real_mnist_dir")
def test_lstm_with_variable_time_axis_every_format_and_precision(tmp_path):
    model = _trained("lstm_classifier", "mnist_sequence", 600, input_shape=(None, 28), units=64)
    assert model.input_shape == (None, None, 28)
    report = _export(model, "mnist_sequence", tmp_path)
    _check(report, tmp_path)
    routes = {r["variant"]: r["route"] for r in report.results if r["format"] == "tflite"}
    # Fixed batch keeps the variable time axis; full int8 needs the unrolled rebuild.
    assert routes == {"float32": "fixed_batch", "float16": "fixed_batch", "dynamic_int8": "fixed_batch",
                      "int8": "unrolled"}
    assert "control flow v2" in next(r for r in report.results if r["format"] == "tfjs")["notes"]


def test_stacked_bidirectional_gru_converts_in_every_tflite_precision(tmp_path):
    """Untrained, random inputs: checks that the routes convert and run; int8 parity is not meaningful here."""
    keras.utils.set_random_seed(0)
    model = zoo.build("gru_classifier", input_shape=(None, 6), num_classes=4, units=8, num_layers=2,
                      bidirectional=True)
    x = np.random.default_rng(0).random((32, 12, 6), dtype=np.float32)
    report = zoo.deploy.export(model, tmp_path, ["tflite"], quantization=ALL_TFLITE, representative_data=x,
                               test_data=(x, np.zeros(32, np.int32)), latency_runs=0)
    statuses = {r["variant"]: r["status"] for r in report.results}
    assert statuses["float32"] == statuses["float16"] == statuses["dynamic_int8"] == "passed", report.table()
    assert statuses["int8"] in ("passed", "failed_verification")  # converted and ran; see the docstring
    assert all(r.get("max_abs_diff") is not None for r in report.results)


def test_tfjs_runs_rnns_returning_sequences_via_the_unrolled_route(tmp_path):
    """tfjs 4.22 cannot run control-flow RNNs that return sequences; the unrolled rebuild at `sequence_length` runs."""
    keras.utils.set_random_seed(0)
    model = zoo.build("char_lstm_lm", input_shape=(None,), num_classes=65, embed_dim=16, units=32)
    report = zoo.deploy.export(model, tmp_path, ["tfjs"], sequence_length=20, latency_runs=0)
    (r,) = report.results
    assert r["status"] == "passed", report.table()
    assert r["route"] == "unrolled" and r["notes"] == ["RNN unrolled; input shape fixed to (batch, 20)"]
    # The variable-length control flow v2 graph is tried first; its runtime failure is reported.
    assert [a["route"] for a in r["attempts"]] == ["control_flow_v2"]
    assert "reading 'backend'" in r["attempts"][0]["error"]
    assert r["output_shapes"] == {"logits": [64, 20, 65]} and r["max_abs_diff"] <= 1e-4
