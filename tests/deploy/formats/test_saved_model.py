"""SavedModel export in TF Serving's layout: parity, signature, atomic versions."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo.deploy.formats.saved_model import export_saved_model
from zoo.deploy.formats.tf_serving import publish, versions
from zoo.deploy.formats.saved_model import publish_saved_model
from zoo.deploy.formats.saved_model import SERVING_SIGNATURE


def test_the_signature_is_the_one_tf_serving_calls_by_default():
    # TF Serving answers a request without signature_name with this key (signature_constants.py).
    assert SERVING_SIGNATURE == tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY


@pytest.fixture(scope="module")
def model():
    tf.keras.utils.set_random_seed(0)
    return zoo.build("convnet_bn")


def test_round_trip_signature_and_parity(model, tmp_path):
    path = publish_saved_model(model, tmp_path, "convnet_bn")
    assert path == tmp_path / "convnet_bn" / "1"
    loaded = tf.saved_model.load(str(path))
    sig = loaded.signatures[SERVING_SIGNATURE]
    (input_name, input_spec), = sig.structured_input_signature[1].items()
    assert input_name == "image"  # the keras.Input's name, not args_0
    assert input_spec.shape.as_list() == [None, 28, 28, 1]  # dynamic batch
    assert list(sig.structured_outputs) == ["predictions"]
    for batch in (1, 7):
        x = np.random.default_rng(batch).random((batch, 28, 28, 1), dtype=np.float32)
        served = sig(image=tf.constant(x))["predictions"].numpy()
        np.testing.assert_allclose(served, model.predict(x, verbose=0), atol=1e-6)


def test_saved_model_cli_shows_named_input_and_dynamic_batch(model, tmp_path):
    path = export_saved_model(model, tmp_path / "sm")
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    out = subprocess.run([cli, "show", "--dir", str(path), "--all"], capture_output=True, text=True, check=True).stdout
    block = out.split(f"signature_def['{SERVING_SIGNATURE}']")[1]
    assert "inputs['image']" in block and "shape: (-1, 28, 28, 1)" in block
    assert "outputs['predictions']" in block


def test_rnn_with_variable_time_axis_exports(tmp_path):
    model = zoo.build("gru_classifier", input_shape=(None, 6), num_classes=4, units=8)
    sig = tf.saved_model.load(str(export_saved_model(model, tmp_path / "rnn"))).signatures[SERVING_SIGNATURE]
    x = np.random.default_rng(0).random((3, 11, 6), dtype=np.float32)
    np.testing.assert_allclose(sig(sequence=tf.constant(x))["predictions"].numpy(), model.predict(x, verbose=0), atol=1e-6)


def test_versions_increment_and_keep_prunes(model, tmp_path):
    for _ in range(3):
        publish_saved_model(model, tmp_path, "m")
    assert versions(tmp_path / "m") == [1, 2, 3]
    publish_saved_model(model, tmp_path, "m", keep=2)
    assert versions(tmp_path / "m") == [3, 4]
    with pytest.raises(FileExistsError):
        publish_saved_model(model, tmp_path, "m", version=4)


def test_a_crash_mid_write_leaves_no_version_directory(tmp_path):
    def crashing_writer(path):
        os.makedirs(path / "variables")
        (path / "saved_model.pb").write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        publish(crashing_writer, tmp_path / "m")
    assert versions(tmp_path / "m") == []
    assert os.listdir(tmp_path / "m") == []  # no temporary left behind either


def test_output_path_that_is_a_file_is_rejected(model, tmp_path):
    blocker = tmp_path / "saved_models"
    blocker.write_text("not a directory")
    with pytest.raises(NotADirectoryError, match="is a file"):
        publish_saved_model(model, blocker, "m")
    assert blocker.read_text() == "not a directory"


def test_the_checkpoint_stores_each_weight_once_and_the_signature_still_finds_them(model, tmp_path):
    # ExportArchive tracked each Keras variable and the tf.Variable it wraps: every weight was stored twice
    # (convnet_bn's 29,978 parameters as 59,958 values). The reference is Keras's own count of its weights.
    path = export_saved_model(model, tmp_path / "sm")
    stored = tf.train.list_variables(str(path / "variables" / "variables"))
    values = sum(int(np.prod(shape)) for name, shape in stored if name != "_CHECKPOINTABLE_OBJECT_GRAPH")
    weights = {id(v) for v in model.weights}
    state = sum(int(np.prod(v.shape)) for v in model.variables if id(v) not in weights)  # Dropout's seed: 2
    assert values == model.count_params() + state == 29_978 + 2
    weight_bytes = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in model.weights)
    data = sum(p.stat().st_size for p in (path / "variables").glob("variables.data-*"))
    assert data <= 1.02 * weight_bytes
    loaded = tf.saved_model.load(str(path))
    assert len(loaded.variables) == len(model.variables)
    x = np.random.default_rng(0).random((3, 28, 28, 1), dtype=np.float32)
    served = loaded.signatures[SERVING_SIGNATURE](image=tf.constant(x))["predictions"].numpy()
    np.testing.assert_allclose(served, model.predict(x, verbose=0), atol=1e-6)
