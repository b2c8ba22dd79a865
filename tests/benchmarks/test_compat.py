"""The compatibility matrix (issue 13) on two tiny models: cells, reasons, resuming, the written files."""

import json

import keras
import numpy as np
import pytest

from benchmarks import compat

CELLS = (("saved_model", "float32"), ("tflite", "int8"), ("onnx", "float32"), ("openvino", "float32"))


def _normalizing_cnn():
    image = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Normalization(mean=[120.0, 110.0, 100.0], variance=[900.0, 800.0, 700.0])(image)
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(8, 3, activation="relu")(x))
    return keras.Model(image, keras.layers.Dense(3, activation="softmax", name="predictions")(x), name="tiny_cnn")


def _text_model():
    vectorize = keras.layers.TextVectorization(max_tokens=10, output_sequence_length=4, name="vectorize")
    vectorize.adapt(np.array(["a b c", "b c d"]))
    text = keras.Input((1,), dtype="string", name="text")
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(10, 2)(vectorize(text)))
    return keras.Model(text, keras.layers.Dense(2, name="logits")(x), name="tiny_text")


POOL = [compat.Candidate("tiny_cnn", "CNN", "test", _normalizing_cnn, "8x8x3", classifier=True),
        compat.Candidate("tiny_text", "text", "test", _text_model, "1 string")]


@pytest.mark.slow  # trains and exports two models; the cells' export and verification are tests/deploy/export's
def test_matrix_records_every_cell_with_its_reason_and_resumes(tmp_path, monkeypatch):
    data = compat.run_matrix(POOL, results_dir=tmp_path, cells=CELLS, progress=None)
    cnn, text = data["models"]["tiny_cnn"]["cells"], data["models"]["tiny_text"]["cells"]
    assert all(cell["status"] == "passed" for cell in cnn.values()), cnn
    assert cnn["onnx[float32]"]["max_abs_diff"] <= 1e-4 and cnn["onnx[float32]"]["size_bytes"] > 0
    # Trained on the tinted-image task before export, so int8 agreement is about real decisions.
    assert data["models"]["tiny_cnn"]["held_out_accuracy"] >= 0.9 and cnn["tflite[int8]"]["accuracy"] >= 0.9
    assert cnn["tflite[int8]"]["argmax_agreement"] >= 0.99 and cnn["openvino[float32]"]["max_abs_diff"] <= 1e-4
    assert "tflite[int8]" not in text  # no class decision: float32 cells only
    assert text["saved_model[float32]"]["status"] == "passed", text["saved_model[float32]"]
    assert text["onnx[float32]"]["status"] == "passed", text["onnx[float32]"]  # its front-end carried as data (issue 40)

    written = json.loads((tmp_path / "compat.json").read_text())
    assert written["models"].keys() == {"tiny_cnn", "tiny_text"}
    markdown = (tmp_path / "compat.md").read_text()
    assert "| tiny_cnn | CNN |" in markdown and "| tiny_text |" in markdown
    assert (tmp_path / "compat.png").stat().st_size > 0

    # Resumed: every cell is done, so nothing is exported again.
    monkeypatch.setattr(compat, "run_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-ran")))
    again = compat.run_matrix(POOL, results_dir=tmp_path, cells=CELLS, progress=None)
    assert again["models"] == written["models"]


def test_every_keras_applications_family_is_in_the_default_matrix():
    import keras as k

    families = {c.family for c in compat.APPLICATIONS}
    expected = {"ResNet", "ResNetV2", "VGG", "DenseNet", "InceptionV3", "InceptionResNetV2", "Xception", "MobileNet",
                "MobileNetV2", "MobileNetV3", "EfficientNet", "EfficientNetV2", "ConvNeXt", "NASNet"}
    assert expected <= families
    for c in [*compat.APPLICATIONS, *compat.MORE_APPLICATIONS]:
        assert hasattr(k.applications, c.name), c.name


def test_matrix_cells_are_every_format_in_float32_and_its_declared_int8():
    from zoo.deploy.formats import FORMATS

    cells = compat.matrix_cells()
    assert [f for f, p in cells if p == "float32"] == list(FORMATS)
    assert {f for f, p in cells if p == "int8"} == {f.name for f in FORMATS.values() if "int8" in (f.precisions or {})}
    assert {"tflite", "onnx", "openvino"} <= {f for f, p in cells if p == "int8"}


def test_export_groups_write_exactly_the_cells_asked():
    cells = [("saved_model", "float32"), ("tflite", "int8"), ("onnx", "float32"), ("onnx", "int8"),
             ("openvino", "float32"), ("tfjs", "float32")]
    assert compat.export_groups(cells) == [(["saved_model", "openvino", "tfjs"], ("float32",)), (["tflite"], ("int8",)),
                                           (["onnx"], ("float32", "int8"))]
    assert compat.export_groups([("tfjs", "float32")]) == [(["tfjs"], ())]


def test_failure_reasons_say_why_and_what_to_do():
    row = {"keras_accuracy": 0.9, "held_out_accuracy": 0.94, "train_epochs": 10,
           "cells": {"onnx[float32]": {"status": "passed"}}}
    int8 = {"status": "failed_verification", "argmax_agreement": 0.97, "accuracy": 0.88, "max_abs_diff": 0.6,
            "error": "argmax agreement 97.00% < 99%"}
    why = compat.failure_reason("onnx[int8]", int8, row)
    assert "97%" in why and "90%" in why and "88%" in why and "float32 passes" in why
    assert "--qat-from" in why and "float16" in why and "TFLite" not in why  # no TFLite int8 cell in this row
    tflite = {"status": "passed", "argmax_agreement": 0.995, "eval_samples": 1000}
    close = compat.failure_reason("onnx[int8]", {**int8, "argmax_agreement": 0.99, "eval_samples": 1000},
                                  {**row, "cells": {"tflite[int8]": tflite}})
    assert "agrees on 99.5% for the same model" in close and "0.5 points below, within" in close
    far = compat.failure_reason("onnx[int8]", {**int8, "eval_samples": 1000},
                                {**row, "cells": {"tflite[int8]": tflite}})
    assert "2.5 points below, more than the images' noise" in far
    error = "UnsupportedOpsError: TFLite cannot run 1 op type(s): StringSplitV2 x1 in 'vectorize' (TextVectorization)."
    assert compat.failure_reason("tflite[float32]", {"status": "export_failed", "error": error}, row) == error


def test_a_rerun_cell_keeps_what_it_replaced_and_the_table_shows_both(tmp_path, monkeypatch):
    old = {"status": "failed_verification", "argmax_agreement": 0.96, "size_bytes": 3,
           "remedy": {"argmax_agreement": 1.0}}
    (tmp_path / "compat.json").write_text(json.dumps({"created": "2026-11-23T00:00:00+00:00", "cells": ["onnx[int8]"],
                                                      "models": {"tiny_cnn": {"cells": {"onnx[int8]": old}}}}))
    new = {"status": "passed", "argmax_agreement": 0.995, "first_100": 1.0, "eval_samples": 1000, "cpu": "CPU X"}
    monkeypatch.setattr(compat, "run_model", lambda *a, **k: {"family": "CNN", "source": "test", "seconds": 1,
                                                               "cells": {"onnx[int8]": dict(new)}})
    data = compat.run_matrix(POOL[:1], results_dir=tmp_path, cells=(("onnx", "int8"),), resume=False, progress=None)
    cell = data["models"]["tiny_cnn"]["cells"]["onnx[int8]"]
    assert cell["previous"] == {"status": "failed_verification", "argmax_agreement": 0.96, "size_bytes": 3,
                                "eval_samples": 100, "remedy_agreement": 1.0, "run": "2026-11-23T00:00:00+00:00"}
    table = (tmp_path / "compat.md").read_text()
    assert "| tiny_cnn | 99.5% / 100% (was 96%) |" in table and "(100 images)" in table
    first_run = cell["run"]
    stored = json.loads((tmp_path / "compat.json").read_text())
    stored["created"] = "2026-11-24T00:00:00+00:00"  # a later run of other cells: not when this one ran
    (tmp_path / "compat.json").write_text(json.dumps(stored))
    again = {**new, "argmax_agreement": 0.999}
    monkeypatch.setattr(compat, "run_model", lambda *a, **k: {"family": "CNN", "source": "test", "seconds": 1,
                                                               "cells": {"onnx[int8]": dict(again)}})
    data = compat.run_matrix(POOL[:1], results_dir=tmp_path, cells=(("onnx", "int8"),), resume=False, progress=None)
    cell = data["models"]["tiny_cnn"]["cells"]["onnx[int8]"]
    assert cell["previous"]["argmax_agreement"] == 0.995 and cell["previous"]["previous"]["argmax_agreement"] == 0.96
    assert cell["previous"]["run"] == first_run != "2026-11-24T00:00:00+00:00"
    assert "| tiny_cnn | 99.9% / 100% (was 96%, then 99.5%) |" in (tmp_path / "compat.md").read_text()
