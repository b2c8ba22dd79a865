"""`zoo.deploy.artifacts.load` (issue 13): an exported classifier's class names and input meaning read back from
every artifact, each also read with the format's own library; damaged artifacts named in the error."""

import json

import keras
import numpy as np
import pytest

import zoo.deploy.artifacts.artifact
import zoo.deploy.export
import zoo.deploy.formats
from zoo.deploy.formats import metadata
from zoo.deploy.artifacts.artifact import ArtifactError

from tests.conftest import EXPORT_CLASSES as CLASSES

FORMATS = list(zoo.deploy.formats.DEFAULT_FORMATS)  # every format of the list whose runtime is installed


@pytest.fixture(scope="module")
def exported(every_format_export):
    """The session's tiny classifier in every format (tests/conftest.py), with class names and an input meaning."""
    return every_format_export


def test_class_names_and_input_meaning_come_back_from_every_artifact(exported):
    """Every format of the list, found by its layout, scanned clean, opened with its metadata, predicting as Keras."""
    import zoo.deploy.scan

    model, x, report = exported
    expected = model.predict(x, verbose=0)
    for result in report.results:
        assert zoo.deploy.formats.detect(result.path).name == result.format
        assert zoo.deploy.scan.scan(result.path).clean, result.format
        artifact = zoo.deploy.artifacts.load(result.path)
        assert artifact.kind == result.format and artifact.runner.inputs[0].shape == (8, 8, 3)
        meta = artifact.metadata
        assert meta is not None, result.format
        assert meta.task == "classification" and meta.class_names == tuple(CLASSES), (result.format, meta)
        assert meta.output == "probs" and meta.input["kind"] == "image" and meta.input["image_size"] == [8, 8]
        assert meta.input["channel_order"] == "RGB" and "Rescaling(scale=0.00392157" in meta.description
        np.testing.assert_allclose(artifact.predict(x), expected, atol=1e-5, err_msg=result.format)
    assert len(report.results) == len(FORMATS)


def test_each_format_carries_the_names_where_its_own_tools_read_them(exported):
    _, _, report = exported
    paths = {r.format: r.path for r in report.results}
    from pathlib import Path

    assert (Path(paths["saved_model"]) / "assets" / "labels.txt").read_text().splitlines() == CLASSES
    import onnx

    props = {p.key: p.value for p in onnx.load(paths["onnx"]).metadata_props}
    assert json.loads(props[metadata.KEY])["class_names"] == CLASSES
    from ai_edge_litert import schema_py_generated as schema  # LiteRT's own flatbuffer schema

    flatbuffer = schema.Model.GetRootAs(Path(paths["tflite"]).read_bytes(), 0)
    entries = {flatbuffer.Metadata(i).Name().decode(): flatbuffer.Metadata(i).Buffer()
               for i in range(flatbuffer.MetadataLength())}
    stored = flatbuffer.Buffers(entries[metadata.KEY]).DataAsNumpy().tobytes()
    assert json.loads(stored)["class_names"] == CLASSES
    spec = json.loads((Path(paths["tfjs"]) / "model.json").read_text())
    assert spec["userDefinedMetadata"][metadata.KEY]["class_names"] == CLASSES
    if "openvino" in paths:
        import openvino as ov

        model = ov.Core().read_model(str(Path(paths["openvino"]) / "model.xml"))
        assert json.loads(model.get_rt_info(metadata.KEY).astype(str))["class_names"] == CLASSES
    card = (Path(report.out_dir) / "report.md").read_text()
    assert "**classes** (3): `cat`, `dog`, `bird`" in card and "**Input meaning**: images 8x8x3" in card


def test_class_names_that_fit_no_output_are_refused_before_any_work(exported, tmp_path):
    with pytest.raises(ValueError, match="4 class_names given, but no output has 4 units: probs \\(3\\)"):
        zoo.deploy.export.export(exported[0], tmp_path / "out", ["onnx"], class_names=["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="duplicates: \\['a'\\]"):
        zoo.deploy.export.export(exported[0], tmp_path / "out2", ["onnx"], class_names=["a", "b", "a"])
    assert not (tmp_path / "out").exists() and not (tmp_path / "out2").exists()


def test_damaged_artifacts_name_the_file_and_what_is_wrong(exported, tmp_path):
    _, _, report = exported
    paths = {r.format: r.path for r in report.results}
    truncated = tmp_path / "cut.tflite"
    from pathlib import Path

    truncated.write_bytes(Path(paths["tflite"]).read_bytes()[:100])
    with pytest.raises(ArtifactError, match=r"cut\.tflite.*damaged or incomplete"):
        zoo.deploy.artifacts.load(truncated)
    garbage = tmp_path / "junk.onnx"
    garbage.write_bytes(b"\x00\x01 not a protobuf")
    with pytest.raises(ArtifactError, match=r"junk\.onnx"):
        zoo.deploy.artifacts.load(garbage)
    with pytest.raises(ArtifactError, match="does not exist"):
        zoo.deploy.artifacts.load(tmp_path / "missing.onnx")


def _pngs(tmp_path, n=3):
    import tensorflow as tf

    pixels = np.random.default_rng(1).integers(0, 256, (n, 8, 8, 3)).astype("uint8")
    paths = []
    for i, image in enumerate(pixels):
        path = tmp_path / f"img{i}.png"
        path.write_bytes(tf.io.encode_png(image).numpy())
        paths.append(str(path))
    return paths, pixels.astype("float32")


def test_zoo_predict_reads_image_files_as_the_metadata_says(exported, tmp_path):
    """Pixels 0-255 for a model rescaling them itself; 0-1 (or a declared mean/std) for one that does not."""
    model, _, report = exported
    paths, pixels = _pngs(tmp_path)
    got = zoo.predict(report.result("onnx").path, paths, progress=False)
    np.testing.assert_allclose(got.outputs, model.predict(pixels, verbose=0), atol=1e-5)
    assert [got.top(i)[0][0] for i in range(len(paths))] == [
        CLASSES[i] for i in model.predict(pixels, verbose=0).argmax(-1)]

    keras.utils.set_random_seed(1)
    image = keras.Input((8, 8, 3), name="image")  # no preprocessing inside: the client standardizes
    bare = keras.Model(image, keras.layers.Dense(2, activation="softmax", name="p")(
        keras.layers.GlobalAveragePooling2D()(image)), name="bare")
    mean, std = [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]
    out = zoo.deploy.export.export(bare, tmp_path / "bare", ["onnx"], latency_runs=0, isolate=False,
                            class_names=["no", "yes"], input_meaning={"mean": mean, "std": std})
    meta = zoo.deploy.artifacts.load(out.result("onnx").path).metadata
    assert meta.input["scale"] == "0-1" and "no preprocessing inside the model" in meta.description
    got = zoo.predict(out.result("onnx").path, paths, progress=False)
    expected = bare.predict((pixels / 255.0 - np.array(mean)) / np.array(std), verbose=0)
    np.testing.assert_allclose(got.outputs, expected, atol=1e-5)


def test_cli_class_names_from_a_file_reach_the_artifact(exported, tmp_path):
    from zoo import cli

    path = tmp_path / "tiny.keras"
    exported[0].save(path)
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\n\nbird\n")  # blank lines ignored
    assert cli.main(["export", str(path), "--formats", "onnx", "--out", str(tmp_path / "out"),
                     "--class-names", str(labels), "--latency-runs", "0"]) == 0
    assert zoo.deploy.artifacts.load(tmp_path / "out" / "tiny_float32.onnx").metadata.class_names == tuple(CLASSES)
    assert cli.main(["export", str(path), "--formats", "onnx", "--out", str(tmp_path / "bad"),
                     "--class-names", "a,b"]) == 2  # 2 names for 3 outputs: refused before any work
    assert not (tmp_path / "bad").exists()
