"""`zoo.build(..., weights=FILE)` and `zoo.architectures.weights.load_weights` (issue 15).

Files are written by Keras itself (`save_weights`, `.keras`, Keras 3's own
legacy `.h5` writer) or in keras.applications' download layout
(tests/architectures/keras_files.py). Each mismatch must be reported, never
loaded around silently.
"""

import h5py
import keras
import numpy as np
import pytest

import zoo
from tests.architectures.keras_files import (
    randomize_weights,
    write_keras_applications_h5,
)
from zoo.architectures.weights import (
    WeightsMismatchError,
    load_weights,
    read_weight_file,
)

SHAPE = (28, 28, 1)


def small(num_classes=10, **kwargs):
    return zoo.build("convnet_bn", input_shape=SHAPE, num_classes=num_classes, filters=(4, 8), **kwargs)


def x_batch():
    return np.random.default_rng(0).random((3, *SHAPE), dtype=np.float32)


@pytest.fixture
def trained_like(tmp_path):
    """A convnet_bn with random statistics, and its weights in keras.applications' layout."""
    model = randomize_weights(small())
    return model, write_keras_applications_h5(model, tmp_path / "convnet_bn.h5")


def assert_same_function(a, b):
    x = x_batch()
    np.testing.assert_array_equal(a(x, training=False), b(x, training=False))


@pytest.mark.parametrize("fmt", ["legacy_h5", "weights_h5", "keras", "keras3_legacy_writer"])
def test_every_file_format_loads_by_name(fmt, trained_like, tmp_path):
    model, legacy = trained_like
    if fmt == "legacy_h5":
        path = legacy
    elif fmt == "weights_h5":
        path = tmp_path / "m.weights.h5"
        model.save_weights(path)
    elif fmt == "keras":
        path = tmp_path / "m.keras"
        model.save(path)
    else:  # Keras 3's own writer of the legacy layout (paths, no ':0', a top_level_model_weights group)
        from keras.src.legacy.saving import legacy_h5_format

        path = tmp_path / "k3.h5"
        with h5py.File(path, "w") as f:
            legacy_h5_format.save_weights_to_hdf5_group(f, model)
    loaded = small(weights=path)
    assert_same_function(model, loaded)
    assert sorted(loaded.load_report.loaded) == sorted(layer.name for layer in model.layers if layer.weights)


def test_another_class_count_is_an_error_naming_the_head_unless_a_new_head_is_asked_for(trained_like):
    model, path = trained_like
    with pytest.raises(WeightsMismatchError, match=r"head_dense: kernel has shape \(\d+, 3\), the file's \(\d+, 10\)"):
        small(num_classes=3, weights=path)
    fresh = small(num_classes=3, weights=path, new_head=True)
    assert fresh.load_report.skipped == {"head_dense": "new head (re-initialized for this model's classes)"}
    for layer in model.layers:
        if layer.weights and layer.name != "head_dense":
            for a, b in zip(layer.get_weights(), fresh.get_layer(layer.name).get_weights()):
                np.testing.assert_array_equal(a, b)


def test_skip_mismatch_names_every_layer_left_as_initialized(trained_like, tmp_path):
    model, _ = trained_like
    # A file without stage2 (conv and BN): as if saved from a shallower model.
    partial = keras.Model(model.input, model.get_layer("stage1_relu").output)
    path = write_keras_applications_h5(partial, tmp_path / "partial.h5")
    with pytest.raises(WeightsMismatchError) as err:
        small(weights=path)
    for name in ("stage2_conv", "stage2_bn", "head_dense"):
        assert f"{name}: not in the file" in str(err.value)
    report = small(weights=path, skip_mismatch=True).load_report
    assert set(report.skipped) == {"stage2_conv", "stage2_bn", "head_dense"}
    assert set(report.loaded) == {"stage1_conv", "stage1_bn"}


def test_a_failed_load_assigns_nothing(trained_like):
    model, path = trained_like
    target = small(num_classes=3)
    before = [w.copy() for w in target.get_weights()]
    with pytest.raises(WeightsMismatchError):
        load_weights(target, path)
    for a, b in zip(before, target.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_another_architectures_file_is_refused(tmp_path):
    lenet = zoo.build("lenet5", input_shape=SHAPE)
    path = write_keras_applications_h5(lenet, tmp_path / "lenet5.h5")
    with pytest.raises(WeightsMismatchError, match="No layer of 'convnet_bn' matched"):
        small(weights=path, skip_mismatch=True)


def test_keras_numbered_names_and_declared_aliases_map(trained_like, tmp_path):
    # A model saved in a session where Keras numbered its layers: `stage1_conv_3` still finds `stage1_conv`.
    # keras.applications' classifier Dense is `predictions` (zoo's is `head_dense`, then a weightless `predictions`).
    model, path = trained_like
    renamed = tmp_path / "renamed.h5"
    with h5py.File(path) as src, h5py.File(renamed, "w") as dst:
        names = [n.decode() for n in src.attrs["layer_names"] if n.decode() != "predictions"]
        new = {n: (f"{n}_3" if n == "stage1_conv" else "predictions" if n == "head_dense" else n) for n in names}
        dst.attrs["layer_names"] = np.asarray([new[n].encode() for n in names])
        for n in names:
            src.copy(src[n], dst, name=new[n])
    loaded = small(weights=renamed)
    assert_same_function(model, loaded)
    assert loaded.load_report.renamed == {"stage1_conv": "stage1_conv_3", "head_dense": "predictions"}


def test_chunked_attributes_are_read(trained_like, tmp_path):
    # Past 64 KB Keras splits `layer_names` into layer_names0, layer_names1, ... (EfficientNet-B7's files).
    model, path = trained_like
    chunked = tmp_path / "chunked.h5"
    with h5py.File(path) as src, h5py.File(chunked, "w") as dst:
        names = list(src.attrs["layer_names"])
        dst.attrs["layer_names0"], dst.attrs["layer_names1"] = names[:2], names[2:]
        for n in names:
            src.copy(src[n.decode()], dst, name=n.decode())
    assert list(read_weight_file(chunked).layers) == list(read_weight_file(path).layers)


@pytest.mark.parametrize("content, message", [
    (b"not an hdf5 file", "Cannot read"),
    (None, "does not exist"),
])
def test_unreadable_sources_get_clear_errors(content, message, tmp_path):
    path = tmp_path / "weights.h5"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(WeightsMismatchError, match=message):
        small(weights=path)


def test_an_hdf5_file_without_keras_weights_is_refused(tmp_path):
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(WeightsMismatchError, match="holds no Keras weights"):
        small(weights=path)


def test_imagenet_is_not_downloaded_and_the_options_need_weights():
    with pytest.raises(WeightsMismatchError, match="downloads nothing"):
        zoo.build("resnet50", weights="imagenet")
    with pytest.raises(ValueError, match="pass weights"):
        small(new_head=True)
