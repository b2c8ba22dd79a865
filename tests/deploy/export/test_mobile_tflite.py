"""The standard TFLite metadata and `mobile` export (issue 28), read by the real mobile clients.

A grayscale digit classifier with `Rescaling(1/255)` inside (what `zoo train --data` makes) is exported
with `zoo.deploy.export.export(..., mobile=True)` (an RGB front, uint8 I/O for full int8), and its RGB twin
(`mobile.rgb_front`) as a plain int8 file; every file carries zoo's metadata and the standard
TFLITE_METADATA. The references are the clients, each in a virtualenv of its own (`scripts/setup.sh
--dev`; the tests say why they skip without one): MediaPipe Tasks' ImageClassifier and the TFLite Task
Library must name the class Keras picks on real PNG files, and tflite-support's MetadataDisplayer (the
standard reader) and Android Studio's code generator must read the metadata back.
"""

import dataclasses

import keras
import numpy as np
import pytest

import zoo
import zoo.deploy.export
import zoo.deploy.formats
from zoo.deploy.export import ExportData
from zoo.deploy.formats import metadata as zoo_metadata
from zoo.deploy.formats import mobile, mobile_clients, tflite_metadata

NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
IMAGES = 20


def _needs(client):
    return pytest.mark.skipif(mobile_clients.absent(client) is not None, reason=str(mobile_clients.absent(client)))


def _mnist(data_dir, split, n):
    import tensorflow_datasets as tfds

    x, y = tfds.as_numpy(tfds.load("mnist", split=f"{split}[:{n}]", batch_size=-1, as_supervised=True,
                                   data_dir=data_dir))
    return x.astype(np.float32), y.astype(np.int32)


@pytest.fixture(scope="module")
def digits(real_mnist_dir, tmp_path_factory):
    """(grayscale classifier taking pixels 0-255, its RGB-front twin, PNG files, Keras's top-1 on them, out dir,
    200 RGB test images)."""
    from PIL import Image

    x, y = _mnist(real_mnist_dir, "train", 3000)
    keras.utils.set_random_seed(0)
    image = keras.Input((28, 28, 1), name="image")
    core = zoo.build("convnet_bn", input_shape=(28, 28, 1), num_classes=10, filters=(8, 16))
    model = keras.Model(image, core(keras.layers.Rescaling(1 / 255, name="rescale")(image)), name="digits")
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=False)
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)
    out = tmp_path_factory.mktemp("mobile")
    test_x, _ = _mnist(real_mnist_dir, "test", IMAGES)
    files = []
    for i, pixels in enumerate(test_x.astype(np.uint8)):
        files.append(out / f"digit_{i}.png")
        Image.fromarray(pixels[..., 0], mode="L").save(files[-1])
    top1 = [NAMES[i] for i in model.predict(test_x, verbose=0).argmax(-1)]
    rgb_x = np.repeat(_mnist(real_mnist_dir, "test", 200)[0], 3, -1)
    return model, mobile.rgb_front(model), files, top1, out, rgb_x


@pytest.fixture(scope="module")
def exported(digits):
    """(report, {precision: TFLite file}, selective report): the grayscale model through
    `zoo.deploy.export.export(..., mobile=True)` (RGB front; float32, float16, and full int8 with uint8 I/O), again
    with `min_agreement` (a selective int8, float I/O: "selective"), and its RGB twin's full int8 with float
    I/O ("int8"). Every export carries zoo's and the standard metadata, and the mobile ones run MediaPipe
    where it is installed (the report's mobile client column)."""
    model, rgb, _, _, out, x = digits
    gray_x = x[..., :1]
    report = zoo.deploy.export.export(model, out / "export", ["tflite"], precision=("float32", "float16", "int8"),
                               mobile=True, data=ExportData(test=gray_x, calibration=gray_x), class_names=NAMES,
                               latency_runs=0, card={"author": "zoo tests", "license": "Apache-2.0", "version": "1"})
    assert report.ok, report.table()
    paths = {("uint8" if r.variant == "int8" else r.variant): r.path for r in report.results}
    plain = zoo.deploy.export.export(rgb, out / "plain", ["tflite"], precision=("int8",), latency_runs=0,
                              data=ExportData(test=x, calibration=x), class_names=NAMES)
    assert plain.ok, plain.table()
    paths["int8"] = plain.results[0].path
    # 200 validation images resolve 95% agreement (99% needs 381), which is all this asks of the guard.
    selective = zoo.deploy.export.export(model, out / "selective", ["tflite"], precision=("int8",), mobile=True,
                                  min_agreement=95, data=ExportData(test=gray_x, calibration=gray_x, validation=gray_x),
                                  class_names=NAMES, latency_runs=0)
    assert selective.ok, selective.table()
    paths["selective"] = selective.results[0].path
    return report, paths, selective


@pytest.fixture(scope="module")
def mobile_files(exported):
    return exported[1]


def test_mobile_export_is_named_noted_and_run_in_mediapipe(exported):
    report, paths, selective = exported
    for r in [*report.results, *selective.results]:
        assert r.path.endswith(f"digits_{r.variant}_mobile.tflite"), r.path
        assert "mobile: RGB input, its channels averaged to gray in the graph" in r.notes
    assert "mobile: uint8 input and output (pixels as stored)" in report.result("tflite", "int8").notes
    (r,) = selective.results
    assert any(n.startswith("mobile: float32 input and output") for n in r.notes), r.notes
    assert r.details["min_agreement"] == 95 and r.details["final_agreement"] >= 0.95, r.details
    if mobile_clients.absent("mediapipe") is None:  # the report's column: the client on 20 test images
        assert report.rows()[0][-1] == "mobile client"
        for r in [*report.results, *selective.results]:
            check = r.details["mobile_client"]
            assert check["accepted"] and check["names_from_file"] and check["images"] == 20, check
            assert check["top1_agree"] >= (19 if r.variant == "int8" else 20), check


def test_mobile_refuses_what_the_clients_cannot_take():
    from zoo.deploy.formats import tflite, tflite_convert

    target = type("Target", (), {"options": {"mobile": True, "int8_io": True}, "variant": "int8"})
    with pytest.raises(ValueError, match="int8_io"):
        tflite_convert._mobile_front(type("Conversion", (), {"target": target, "model": None}), None)
    assert tflite.FORMAT.artifact_name("m", "int8", {"mobile": True}) == "m_int8_mobile.tflite"
    assert tflite.FORMAT.artifact_name("m", "int8", {"mobile": False}) == "m_int8.tflite"


def _calibration(files):
    from PIL import Image

    return np.stack([np.asarray(Image.open(f), np.float32)[..., None] for f in files])


def test_rgb_front_averages_the_channels_in_the_graph(digits):
    model, rgb, files, _, _, _ = digits
    gray = _calibration(files)
    tinted = np.concatenate([gray * 0.5, gray, gray * 1.5], -1)  # channel mean: gray itself
    np.testing.assert_allclose(rgb.predict(tinted, verbose=0), model.predict(gray, verbose=0), atol=1e-5)
    assert rgb.inputs[0].shape[1:] == (28, 28, 3) and rgb.inputs[0].name.startswith("image")
    assert mobile.rgb_front(rgb) is rgb  # already RGB


def test_normalization_maps_stored_pixels_to_what_the_graph_takes():
    pixels = np.array([0.0, 51.0, 255.0])
    for scale, graph in (("0-255", pixels), ("0-1", pixels / 255)):
        mean, std = tflite_metadata.normalization(scale)
        np.testing.assert_allclose((pixels - mean[0]) / std[0], graph)
    mean, std = tflite_metadata.normalization("0-1", mean=[0.5, 0.4, 0.3], std=[0.2, 0.2, 0.25])
    np.testing.assert_allclose((pixels[:, None] - mean) / std, (pixels[:, None] / 255 - [0.5, 0.4, 0.3]) / [0.2, 0.2, 0.25])
    with pytest.raises(ValueError, match="0-255"):
        tflite_metadata.normalization("-1-1")


def test_both_metadata_read_back_and_agree(digits, mobile_files):
    for precision, path in mobile_files.items():
        standard = tflite_metadata.read(path)
        assert standard.labels == list(NAMES), precision
        assert standard.normalization == ([0.0], [1.0]), precision  # Rescaling(1/255) inside: pixels as stored
        ours = zoo.deploy.formats.read_metadata(path)
        assert ours.class_names == NAMES and ours.input["channels"] == 3 and ours.input["scale"] == "0-255"
        subgraph = standard.metadata["subgraph_metadata"][0]
        kind, image = subgraph["input_tensor_metadata"][0]["content"]["content_properties"]
        assert (kind, image["color_space"], image["default_size"]) == ("ImageProperties", "RGB",
                                                                         {"width": 28, "height": 28})
        assert standard.metadata["min_parser_version"] == tflite_metadata.MIN_PARSER_VERSION


def test_rewriting_zoo_metadata_keeps_the_packed_labels(mobile_files, tmp_path):
    """The trap of issue 28: a zoo_metadata rewrite after the standard metadata dropped labels.txt."""
    path = tmp_path / "copy.tflite"
    path.write_bytes(open(mobile_files["float32"], "rb").read())
    zoo.deploy.formats.write_metadata(path, dataclasses.replace(zoo.deploy.formats.read_metadata(path), description="rewritten"))
    assert zoo.deploy.formats.read_metadata(path).description == "rewritten"
    assert tflite_metadata.read(path).labels == list(NAMES)
    assert tflite_metadata.associated_files(path.read_bytes()) == {"labels.txt": "".join(
        f"{n}\n" for n in NAMES).encode()}


def test_uint8_input_reads_stored_pixels(mobile_files):
    from ai_edge_litert.interpreter import Interpreter

    (selective,) = Interpreter(model_path=mobile_files["selective"]).get_input_details()
    assert selective["dtype"] == np.float32 and tuple(selective["shape"]) == (1, 28, 28, 3)  # what the clients take
    (details,) = Interpreter(model_path=mobile_files["uint8"]).get_input_details()
    assert details["dtype"] == np.uint8
    assert mobile.uint8_input_matches(details["quantization"], [0.0], [1.0]), details["quantization"]
    assert not mobile.uint8_input_matches((1 / 255, 0), [0.0], [1.0])


@_needs("mediapipe")
def test_mediapipe_image_classifier_names_keras_top1(digits, mobile_files):
    _, _, files, top1, _, _ = digits
    answer = mobile_clients.mediapipe_classify(list(mobile_files.values()), files)
    for precision, path in mobile_files.items():
        named = [result[0]["name"] for result in answer["results"][path]]
        assert named == top1, (precision, named, top1)


@_needs("tflite_support")
def test_the_task_library_image_classifier_names_keras_top1(digits, mobile_files):
    _, _, files, top1, _, _ = digits
    for precision in ("float32", "uint8", "selective"):
        answer = mobile_clients.task_library_classify(mobile_files[precision], files)
        assert [result[0]["name"] for result in answer["results"]] == top1, precision


@_needs("tflite_support")
def test_the_standard_reader_and_the_android_code_generator_take_it(mobile_files, tmp_path):
    shown = mobile_clients.read_metadata(mobile_files["uint8"])
    meta = shown["metadata"]
    assert (meta["name"], meta["version"], meta["author"], meta["license"]) == ("digits", "1", "zoo tests", "Apache-2.0")
    image = meta["subgraph_metadata"][0]["input_tensor_metadata"][0]
    assert image["process_units"][0]["options"] == {"mean": [0.0], "std": [1.0]}
    assert image["content"]["content_properties"]["color_space"] == "RGB"
    output = meta["subgraph_metadata"][0]["output_tensor_metadata"][0]
    assert output["associated_files"][0]["type"] == "TENSOR_AXIS_LABELS"
    assert shown["files"]["labels.txt"].splitlines() == list(NAMES)
    generated = mobile_clients.codegen(mobile_files["float32"], tmp_path / "android")
    assert generated["returncode"] == 0, generated
    java = (tmp_path / "android" / "src/main/java/org/zoo/model/ZooModel.java").read_text()
    assert "AsCategoryList" in java and "NormalizeOp" in java
