"""Export's bad inputs, option validation and crash isolation (issue 5)."""

import dataclasses
import json
import os

import numpy as np
import pytest

import zoo
import zoo.deploy.export
import zoo.deploy.formats.inputs
import zoo.deploy.artifacts
from zoo import cli
from zoo.deploy import formats
from zoo.errors import UnknownNameError
from zoo.deploy.export import ExportData


@pytest.fixture(scope="module")
def model():
    return zoo.build("lenet5")


def test_misspelled_format_gets_suggestions_and_nothing_is_written(model, tmp_path):
    with pytest.raises(UnknownNameError, match=r"Unknown export format 'tflit'. Did you mean: tflite"):
        zoo.deploy.export.export(model, tmp_path / "out", "saved_model,tflit")
    assert not (tmp_path / "out").exists()


def test_an_option_the_format_does_not_take_is_rejected_saying_who_takes_it(model, tmp_path):
    with pytest.raises(formats.OptionError, match=r"'int8_io' is not taken by .*onnx.*only tflite"):
        zoo.deploy.export.export(model, tmp_path, ["onnx"], int8_io=True)
    with pytest.raises(formats.OptionError, match="'opset' is not taken"):
        zoo.deploy.export.export(model, tmp_path, ["tflite", "tfjs"], opset=17)


def test_bad_option_values_name_the_allowed_ones(model, tmp_path):
    with pytest.raises(UnknownNameError, match=r"Unknown tflite precision 'int4'. Did you mean: int8"):
        zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="float32,int4")
    with pytest.raises(UnknownNameError, match=r"Unknown onnx precision 'dynamic_int8'.*Available: float16, float32, int8"):
        zoo.deploy.export.export(model, tmp_path, ["onnx"], precision="dynamic_int8")
    with pytest.raises(formats.OptionError, match="opset expects an integer from 13 to 18. Received: opset=99"):
        zoo.deploy.export.export(model, tmp_path, ["onnx"], opset=99)
    with pytest.raises(UnknownNameError, match="float16"):
        zoo.deploy.export.export(model, tmp_path, ["tfjs"], weight_quantization="float61")


def test_full_int8_needs_calibration_data_of_the_right_shape(model, tmp_path):
    with pytest.raises(formats.OptionError, match=r"int8 \(tflite\) needs calibration data .*ExportData\(calibration="):
        zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="int8")
    wrong = np.zeros((8, 28, 28), np.float32)  # no channel axis
    with pytest.raises(zoo.deploy.formats.inputs.DataShapeError, match=r"shape \(28, 28\).*'image' expects \(28, 28, 1\)"):
        zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="int8", data=ExportData(calibration=wrong))
    assert os.listdir(tmp_path) == []


def test_the_int8_agreement_guard_checks_its_value_and_its_data(model, tmp_path):
    rep = np.zeros((4, 28, 28, 1), np.float32)
    for bad in (0, 100.5, "99", True):
        with pytest.raises(formats.OptionError, match=r"min_agreement expects a number in \(0, 100\]"):
            zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="int8", data=ExportData(calibration=rep),
                              min_agreement=bad)
    with pytest.raises(formats.OptionError, match=r"min_agreement needs validation data \(inputs; labels are not"):
        zoo.deploy.export.export(model, tmp_path, ["onnx"], precision="int8", data=ExportData(calibration=rep),
                          min_agreement=99)
    with pytest.raises(formats.OptionError, match="give one of them"):
        zoo.deploy.export.export(model, tmp_path, ["tflite"], precision="int8",
                          data=ExportData(calibration=rep, validation=(rep, np.zeros(4, "int32"))), min_agreement=99,
                          max_accuracy_drop=1.0)
    with pytest.raises(formats.OptionError, match=r"min_agreement guards int8 artifacts.*add int8 to precision"):
        zoo.deploy.export.export(model, tmp_path, ["tflite"], min_agreement=99, data=ExportData(validation=rep))
    # 99% at 95% confidence: 381 inputs (n / (n + 1.96^2) >= 0.99), whatever they show.
    with pytest.raises(formats.OptionError, match="min_agreement=99 needs at least 381 validation inputs: with 380"):
        zoo.deploy.export.export(model, tmp_path, ["onnx"], precision="int8",
                          data=ExportData(calibration=rep, validation=np.zeros((380, 28, 28, 1), np.float32)),
                          min_agreement=99,
                          )
    assert os.listdir(tmp_path) == []


def test_missing_and_corrupt_model_files(tmp_path):
    with pytest.raises(zoo.deploy.artifacts.ModelFileError, match="does not exist"):
        zoo.deploy.export.export(tmp_path / "nope.keras", tmp_path / "out")
    corrupt = tmp_path / "bad.keras"
    corrupt.write_bytes(b"PK\x03\x04 this is not a model")
    with pytest.raises(zoo.deploy.artifacts.ModelFileError, match="corrupt"):
        zoo.deploy.export.export(corrupt, tmp_path / "out")
    assert cli.main(["export", str(tmp_path / "nope.keras")]) == 2


def test_unwritable_output_directory(model, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        zoo.deploy.export.export(model, blocker / "out", ["onnx"])
    if os.geteuid() == 0:  # root writes through permission bits; /proc refuses everyone
        target = "/proc/zoo-export-test"
    else:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        target = ro / "out"
    with pytest.raises(zoo.deploy.export.OutputDirError, match="is not writable"):
        zoo.deploy.export.export(model, target, ["onnx"])


@pytest.fixture
def crashing_onnx(monkeypatch):
    crash = dataclasses.replace(formats.FORMATS["onnx"], module="tests.deploy.export.crashing_format")
    monkeypatch.setitem(formats.FORMATS, "onnx", crash)


@pytest.mark.usefixtures("crashing_onnx")
def test_a_converter_crash_fails_only_its_format(model, tmp_path):
    report = zoo.deploy.export.export(model, tmp_path, ["saved_model", "onnx", "tflite"], latency_runs=0)
    status = {r.format: r for r in report.results}
    assert status["onnx"].status == "export_failed"
    assert "SIGSEGV" in status["onnx"].error
    # The formats after the crash ran in a fresh process and were written and verified.
    assert status["saved_model"].status == status["tflite"].status == "passed"
    assert (tmp_path / "lenet5_float32.tflite").is_file()
    saved = json.loads((tmp_path / "report.json").read_text())
    assert not saved["ok"] and [r["status"] for r in saved["results"]] == ["passed", "passed", "export_failed"]
    assert "export FAILED" in (tmp_path / "report.md").read_text()


@pytest.mark.usefixtures("crashing_onnx")
def test_cli_exits_nonzero_after_writing_what_succeeded(tmp_path, capsys):
    rc = cli.main(["export", "lenet5", "--formats", "tflite,onnx", "--opset", "13", "--out", str(tmp_path),
                   "--latency-runs", "0"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "converter said no" in out and "passed" in out
    assert (tmp_path / "lenet5_float32.tflite").is_file() and (tmp_path / "report.md").is_file()


def test_formats_table_drives_the_docs():
    table = formats.markdown_table()
    for f in formats.FORMATS.values():
        assert f"`{f.name}`" in table and f.runtime in table
        for option in f.options:
            assert f"`{option.name}`" in table and option.help in table


def test_a_relative_output_directory_works_for_every_runtime(model, tmp_path, monkeypatch):
    # The TF.js runner runs Node in its own folder: a relative artifact path once broke it there.
    monkeypatch.chdir(tmp_path)
    report = zoo.deploy.export.export(model, "relative_out", ["tfjs", "onnx"], latency_runs=0)
    assert report.ok, report.table()
