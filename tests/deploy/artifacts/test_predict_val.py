"""`zoo predict` and `zoo val` on every artifact kind, against Keras and against independent references.

A tiny image classifier and a tiny table regressor, built by `zoo.training.own_data` from tiny data
(untrained weights are enough: every runtime must agree with Keras on them). Pixels are read with
Pillow, table columns with pandas, metrics with scikit-learn: none of it is the code under test.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import zoo  # noqa: E402
from zoo.deploy.formats import metadata  # noqa: E402
from zoo.deploy.artifacts.artifact import ArtifactError, load  # noqa: E402
from zoo.errors import DataError  # noqa: E402


def _png(path, array):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(array, np.uint8)).save(path)


@pytest.fixture(scope="module")
def image_model(tmp_path_factory):
    """(model, data folder, test files): an untrained convnet for 8x8 RGB images of 3 classes."""
    from zoo.training import own_data, planner

    root = tmp_path_factory.mktemp("images") / "shapes"
    rng = np.random.default_rng(0)
    for split, n in (("train", 6), ("test", 4)):
        for c, tint in (("red", 0), ("green", 1), ("blue", 2)):
            for i in range(n):
                a = rng.integers(0, 120, (8, 8, 3))
                a[..., tint] += 120
                _png(root / split / c / f"{i}.png", a)
    config, data = planner.config_for_data(str(root), log=lambda line: None, model_overrides={"filters": [4, 8]})
    model = own_data.build_model(config, data)
    return model, root, data.splits.files["test"]


LITE = ("tflite", "onnx", *(("openvino",) if "openvino" in zoo.deploy.formats.DEFAULT_FORMATS else ()))  # no TensorFlow


@pytest.fixture(scope="module")
def exported(image_model, tmp_path_factory):
    model, _, _ = image_model
    out = tmp_path_factory.mktemp("export")
    report = zoo.deploy.export.export(model, out, ("saved_model", *LITE), latency_runs=0)
    assert report.ok, report.table()
    model.save(out / "model.keras")
    paths = {r.format: r.path for r in report.results}
    return {"keras": str(out / "model.keras"), **paths}


def _pillow(files):
    from PIL import Image

    return np.stack([np.asarray(Image.open(f).convert("RGB"), np.float32) for f in files])


@pytest.mark.parametrize("kind", ["keras", "saved_model", "tflite", "onnx"])
def test_every_artifact_carries_metadata_and_predicts_like_keras(kind, image_model, exported):
    model, _, files = image_model
    meta = zoo.deploy.formats.read_metadata(exported[kind])
    assert meta == metadata.of_model(model) and meta.class_names == ("blue", "green", "red")
    result = zoo.predict(exported[kind], files, top_k=2)
    reference = model.predict(_pillow(files), verbose=0)  # Keras on pixels read by Pillow
    np.testing.assert_allclose(result.outputs, reference, atol=1e-5)
    assert result.kind == kind and result.names == files
    best = [meta.class_names[i] for i in reference.argmax(-1)]
    assert [r["class"] for r in result.rows()] == best
    assert all(len(r["top"]) == 2 for r in result.rows())


def test_artifact_paths_resolve_run_dirs_and_serving_base_dirs(exported, tmp_path):
    version = exported["saved_model"]
    base = os.path.dirname(version)
    assert load(base).path.name == os.path.basename(version)  # the newest version
    assert str(load(os.path.dirname(base)).path) == version  # zoo export's serving root, one model
    run = tmp_path / "run"
    run.mkdir()
    os.link(exported["keras"], run / "last.keras")
    assert load(run).kind == "keras"
    with pytest.raises(ArtifactError, match="It holds .*model.keras.*name one of them"):
        load(os.path.dirname(exported["keras"]))
    with pytest.raises(ArtifactError, match="does not exist"):
        load(tmp_path / "nope.tflite")


def _loaded_after(code: str) -> list[str]:
    """The modules a fresh interpreter has loaded after running `code` (as tests/test_layers.py's)."""
    import json
    import subprocess
    import sys

    probe = f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()), cwd=os.getcwd()).stdout
    return json.loads(out.splitlines()[-1])


def test_predict_and_val_on_a_lite_runtime_import_neither_tensorflow_nor_keras(exported, image_model):
    """`zoo predict` on image files, and Python's load, predict and val on arrays, with a TFLite, ONNX and OpenVINO
    artifact: the runtime and Pillow, never TensorFlow's seconds of start-up (nor Keras's, which imports it).

    `zoo val --data FOLDER` too: a folder's own test/ split is read with Pillow; its accuracy is Keras's.
    """
    model, root, files = image_model
    x = _pillow(files[:4])
    y = model.predict(x, verbose=0).argmax(-1)
    truth = np.array([("blue", "green", "red").index(os.path.basename(os.path.dirname(f))) for f in files])
    accuracy = float(np.mean(model.predict(_pillow(files), verbose=0).argmax(-1) == truth))  # the folder's test/
    code = "import json, numpy as np, zoo.cli, zoo.deploy.artifacts\n"
    for kind in LITE:
        code += (f"assert zoo.cli.main(['predict', {exported[kind]!r}, *{files[:4]!r}]) == 0\n"
                 f"art = zoo.deploy.artifacts.load({exported[kind]!r})\n"
                 f"assert art.kind == {kind!r} and art.predict(np.zeros((2, 8, 8, 3), np.float32)).shape == (2, 3)\n"
                 f"report = zoo.deploy.artifacts.val(art, (np.array({x.tolist()!r}, np.float32), np.array({y.tolist()!r})))\n"
                 "assert report.metrics['accuracy'] == 1.0, report.table()\n")  # the same decisions as Keras
        out = root.parent / f"val-{kind}"
        code += (f"assert zoo.cli.main(['val', {exported[kind]!r}, '--data', {str(root)!r}, '--out', {str(out)!r}]) "
                 f"== 0\nassert json.load(open({str(out / 'report.json')!r}))['metrics']['accuracy'] == {accuracy!r}\n")
    heavy = [m for m in _loaded_after(code) if m.split(".")[0] in ("tensorflow", "keras", "tf_keras")]
    assert heavy == []


def test_predict_output_formats_and_skipped_files(exported, image_model, tmp_path, capsys):
    from zoo.cli import main

    _, root, files = image_model
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "broken.png").write_bytes(b"no")
    out = tmp_path / "p.csv"
    assert main(["predict", exported["onnx"], files[0], str(tmp_path / "in"), "--format", "csv",
                 "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "input,class,score,score_blue,score_green,score_red" and len(lines) == 2
    assert "skipped" in capsys.readouterr().err
    assert main(["predict", exported["tflite"], files[0], "--format", "json"]) == 0
    import json

    printed = json.loads(capsys.readouterr().out)
    assert printed["classes"] == ["blue", "green", "red"] and len(printed["predictions"][0]["top"]) == 3
    zoo.predict(exported["onnx"], files, progress=True, batch_size=4)  # 12 files in 3 batches
    assert "12/12" in capsys.readouterr().err


def test_val_matches_sklearn_and_keras_evaluate(exported, image_model, tmp_path):
    from sklearn import metrics

    model, root, files = image_model
    report = zoo.val(exported["tflite"], str(root))
    assert report.split == "test" and report.examples == len(files) == 12
    truth = np.array([("blue", "green", "red").index(os.path.basename(os.path.dirname(f))) for f in files])
    predicted = model.predict(_pillow(files), verbose=0).argmax(-1)
    assert report.metrics["accuracy"] == pytest.approx(metrics.accuracy_score(truth, predicted))
    p, r, f, s = metrics.precision_recall_fscore_support(truth, predicted, labels=[0, 1, 2], zero_division=0)
    for i, row in enumerate(report.per_class):
        assert (row["precision"], row["recall"], row["f1"], row["support"]) == pytest.approx((p[i], r[i], f[i], s[i]))
    np.testing.assert_array_equal(report.confusion, metrics.confusion_matrix(truth, predicted, labels=[0, 1, 2]))
    out = report.write(tmp_path / "val")
    assert (out / "confusion_matrix.png").stat().st_size > 1000 and (out / "report.json").is_file()


def test_table_regressor_predicts_rows_in_the_target_units(tmp_path):
    from zoo.training import own_data, planner

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"area": rng.normal(80, 20, 60), "floor": rng.integers(0, 9, 60)})
    frame["price"] = frame["area"] * 3000.0 + rng.normal(0, 1000, 60)
    frame.to_csv(tmp_path / "flats.csv", index=False)
    config, data = planner.config_for_data(str(tmp_path / "flats.csv"), target_column="price", log=lambda line: None)
    model = own_data.build_model(config, data)
    model.save(tmp_path / "m.keras")
    rows = frame.drop(columns="price").iloc[:5]
    rows.to_csv(tmp_path / "new.csv", index=False)
    result = zoo.predict(tmp_path / "m.keras", [tmp_path / "new.csv"])
    reference = model.predict(rows[["area", "floor"]].to_numpy(np.float32), verbose=0)  # pandas reads the columns
    np.testing.assert_allclose(result.outputs, reference, rtol=1e-5)
    assert result.task == "regression" and "price: " in result.table()
    rows.rename(columns={"area": "aera"}).to_csv(tmp_path / "typo.csv", index=False)
    with pytest.raises(DataError, match=r"lacks the model's input column\(s\) \['area'\]\. Did you mean: aera\?"):
        zoo.predict(tmp_path / "m.keras", [tmp_path / "typo.csv"])
    report = zoo.val(tmp_path / "m.keras", str(tmp_path / "flats.csv"))
    assert report.split == "test" and report.examples == 6  # the same 10% drawn again with the same seed
    assert report.metrics["mae"] == pytest.approx(np.mean(np.abs(report.predictions - report.targets)))
