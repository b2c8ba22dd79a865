"""`zoo.deploy.export.plan`: every check before any work, an immutable plan, data read by role only where needed, and
`Job`s that are plain data."""

from __future__ import annotations

import dataclasses
import os
import pickle

import keras
import numpy as np
import pytest

import zoo.deploy.export
from zoo.deploy.export import ExportData
from zoo.deploy.formats import OptionError
from zoo.deploy.formats.jobs import Job, ModelFacts, Target
from zoo.deploy.formats.trace import signature_of
from zoo.deploy.formats.unsafe import AllowListError, Trust


@pytest.fixture(scope="module")
def model():
    inputs = keras.Input((6,), name="features")
    return keras.Model(inputs, keras.layers.Dense(3, activation="softmax", name="predictions")(inputs), name="tiny")


def test_a_plan_is_checked_immutable_and_says_what_it_will_do(model, tmp_path):
    x, y = np.random.default_rng(0).random((40, 6), np.float32), np.arange(40) % 3
    plan = zoo.deploy.export.plan(model, tmp_path / "out", ["tflite", "onnx"], precision=("float32", "int8"), opset=17,
                           data=ExportData(test=(x, y), calibration=x[:20], max_test_samples=30))
    assert [t.label for t in plan.targets] == ["tflite[float32]", "tflite[int8]", "onnx[float32]", "onnx[int8]"]
    assert plan.options["onnx"]["opset"] == 17 and plan.options["tflite"]["calibration_samples"] == 200
    assert len(plan.data.test_x["features"]) == 30 and len(plan.data.calibration_x["features"]) == 20
    assert os.listdir(tmp_path / "out") == []  # checked, nothing written
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.verify = False
    with pytest.raises(TypeError):
        plan.options["onnx"] = {}
    text = plan.describe()
    assert "tflite[int8]" in text and "test data: test data (30 examples)" in text and "20 examples of calibration" in text


def test_roles_given_as_functions_are_read_only_when_the_plan_needs_them(model, tmp_path):
    read = []

    def role(name, value):
        def load():
            read.append(name)
            return value

        return load

    x = np.zeros((400, 6), np.float32)
    data = ExportData(test=role("test", x[:8]), calibration=role("calibration", x), validation=role("validation", x))
    zoo.deploy.export.plan(model, tmp_path, ["onnx"], data=data)
    assert read == ["test"]  # float32 only: no calibration, no validation
    zoo.deploy.export.plan(model, tmp_path, ["onnx"], data=data, precision="int8", min_agreement=99)
    assert read == ["test", "test", "calibration", "validation"]


def test_what_the_cli_selects_python_callers_get_from_export_data(model):
    with pytest.raises(TypeError, match="say which role they play: ExportData\\(test=..., calibration=..."):
        ExportData.of((np.zeros((2, 6)), np.zeros(2)))
    data = ExportData.of("mnist")  # a dataset name: its splits, each read on first use
    assert data.description == "mnist test split" and callable(data.calibration)
    with pytest.raises(ValueError, match="max_test_samples must be a positive integer"):
        ExportData(max_test_samples=0)


def test_zoo_export_data_takes_the_splits_given_for_your_own_data(model, monkeypatch):
    """`--train-split`/`--val-split` with `--data`: splits of your data (the dataset defaults slice a registered
    dataset's train split, which your data has no use for)."""
    from zoo.cli import build_parser
    from zoo.cli.export import export_data

    taken = []
    monkeypatch.setattr(ExportData, "from_path", classmethod(lambda cls, path, m, **kw: taken.append(kw)))
    for extra in ([], ["--val-split", "train"], ["--train-split", "all"]):
        export_data(build_parser().parse_args(["export", "m.keras", "--data", "folder", *extra]), model)
    assert taken == [{"max_test_samples": None}, {"max_test_samples": None, "validation_split": "train"},
                     {"max_test_samples": None, "calibration_split": "all"}]


def test_trust_is_one_object_and_refuses_wildcards():
    assert Trust("ReadFile, PyFunc").allow_unsafe_ops == ("ReadFile", "PyFunc")
    assert Trust.of(None) == Trust() and Trust.of(["Lambda"]).allow_unsafe_ops == ("Lambda",)
    with pytest.raises(AllowListError, match="exact op names, not '\\*'"):
        Trust("*")


def test_jobs_are_plain_data_that_cross_processes(model, tmp_path):
    """A job holds no behaviour (what formats build from it is `zoo.deploy.formats.conversion.Conversion`'s) and
    pickles to an equal job, as it travels to the conversion process."""
    facts = ModelFacts(name="tiny", signature=signature_of(model), output_names=("predictions",),
                       layers={"tiny": "Functional"})
    job = Job(target=Target("onnx", "zoo.deploy.formats.onnx", "float32", "float32", str(tmp_path / "m.onnx"), {"opset": 17}),
              model=facts, work_dir=str(tmp_path), data={"test": str(tmp_path / "test.npz")}, trust=Trust("Lambda"))
    assert pickle.loads(pickle.dumps(job)) == job
    behaviour = [name for name, value in vars(Job).items() if callable(value) and not name.startswith("__")]
    assert behaviour == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.verify = False


def test_zoo_export_dry_run_prints_the_plan_and_converts_nothing(model, tmp_path, capsys):
    from zoo import cli

    path = tmp_path / "tiny.keras"
    model.save(path)
    assert cli.main(["export", str(path), "--formats", "tflite,onnx", "--precision", "float32,float16",
                     "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "onnx[float16]" in printed and "random inputs (no test data given)" in printed
    assert os.listdir(tmp_path / "out") == []
    with pytest.raises(OptionError, match="only onnx take"):
        zoo.deploy.export.plan(model, tmp_path / "out", ["tflite"], opset=17)
