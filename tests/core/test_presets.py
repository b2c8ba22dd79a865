"""Presets: the local store, keras-hub's folder layout, and every way a preset can be unusable (issue 15)."""

import json

import numpy as np
import pytest

import zoo
from tests.architectures.keras_files import randomize_weights
from zoo.core import presets
from zoo.core.presets import PresetError
from zoo.errors import UnknownNameError

SHAPE = (28, 28, 1)
OVERRIDES = {"filters": [4, 8], "pooling": "avg"}


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "presets"


@pytest.fixture
def saved(store):
    model = randomize_weights(zoo.build("convnet_bn", input_shape=SHAPE, num_classes=5, **OVERRIDES))
    preset = presets.save_preset(
        model, "convnet_bn_tiny", architecture="convnet_bn", input_shape=SHAPE, num_classes=5, overrides=OVERRIDES,
        recipe={"epochs": 1}, data={"dataset": "mnist"}, metrics={"test_accuracy": 0.5}, license="CC BY-SA 3.0",
    )
    return model, preset


def x_batch():
    return np.random.default_rng(0).random((3, *SHAPE), dtype=np.float32)


def test_a_preset_rebuilds_the_model_it_was_saved_from(saved, store):
    model, preset = saved
    assert preset.path == store / "convnet_bn_tiny"
    assert sorted(p.name for p in preset.path.iterdir()) == ["config.json", "metadata.json", "model.weights.h5"]
    loaded = zoo.build("convnet_bn", weights="convnet_bn_tiny")  # shape, classes and overrides from the preset
    assert loaded.output_shape == (None, 5) and loaded.get_layer("avg_pool")
    x = x_batch()
    np.testing.assert_array_equal(loaded(x, training=False), model(x, training=False))
    by_folder = zoo.build("convnet_bn", weights=str(preset.path))
    np.testing.assert_array_equal(by_folder(x, training=False), model(x, training=False))
    meta = json.loads((preset.path / "metadata.json").read_text())
    assert meta["metrics"] == {"test_accuracy": 0.5} and meta["license"] == "CC BY-SA 3.0"
    assert meta["weights_sha256"] == presets.sha256(preset.weights_path) and meta["parameter_count"] == model.count_params()


def test_a_corrupt_weight_file_fails_its_checksum(saved):
    _, preset = saved
    data = bytearray(preset.weights_path.read_bytes())
    data[-100] ^= 0xFF
    preset.weights_path.write_bytes(bytes(data))
    with pytest.raises(PresetError, match="SHA-256"):
        zoo.build("convnet_bn", weights="convnet_bn_tiny")
    assert isinstance(dict(presets.list_presets())["convnet_bn_tiny"], PresetError)


@pytest.mark.parametrize("damage, message", [
    (lambda p: (p / "model.weights.h5").unlink(), "has no model.weights.h5"),
    (lambda p: (p / "metadata.json").unlink(), "has no metadata.json"),
    (lambda p: (p / "config.json").write_text("{not json"), "config.json' is not valid JSON"),
    (lambda p: (p / "config.json").write_text('{"num_classes": 5}'), "lacks architecture, input_shape"),
])
def test_a_damaged_preset_names_what_is_wrong(saved, damage, message):
    _, preset = saved
    damage(preset.path)
    with pytest.raises(PresetError, match=message):
        zoo.build("convnet_bn", weights="convnet_bn_tiny")


def test_a_preset_of_another_architecture_is_refused(saved):
    with pytest.raises(PresetError, match="holds weights of 'convnet_bn', not 'lenet5'"):
        zoo.build("lenet5", weights="convnet_bn_tiny")


def test_an_unknown_preset_suggests_close_names(saved):
    with pytest.raises(UnknownNameError, match="convnet_bn_tiny"):
        zoo.build("convnet_bn", weights="convnet_bn_tin")


def test_saving_refuses_to_overwrite_and_leaves_nothing_half_written(saved, store):
    model, _ = saved
    with pytest.raises(FileExistsError):
        presets.save_preset(model, "convnet_bn_tiny", architecture="convnet_bn", input_shape=SHAPE, num_classes=5)

    class Broken:
        def save_weights(self, path):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        presets.save_preset(Broken(), "half", architecture="convnet_bn", input_shape=SHAPE, num_classes=5)
    assert presets.preset_names() == ["convnet_bn_tiny"]
    assert [p.name for p in store.iterdir()] == ["convnet_bn_tiny"]  # no temporary folder left behind
    with pytest.raises(PresetError, match="lowercase"):
        presets.save_preset(model, "Bad Name", architecture="convnet_bn", input_shape=SHAPE, num_classes=5)


def test_a_keras_hub_preset_folder_gets_a_pointed_error(tmp_path):
    folder = tmp_path / "resnet_50_imagenet"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"module": "keras_hub.src.models.resnet.resnet_backbone",
                                                    "class_name": "ResNetBackbone", "config": {}}))
    (folder / "metadata.json").write_text("{}")
    with pytest.raises(PresetError, match="keras-hub preset"):
        zoo.build("resnet50", weights=str(folder))
