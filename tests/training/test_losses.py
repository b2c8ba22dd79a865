"""zoo's sparse cross-entropy with label smoothing against Keras' one-hot CategoricalCrossentropy."""

import keras
import numpy as np
import pytest

from zoo.training.losses import SparseCategoricalCrossentropy
from zoo.training.tasks import get_task


@pytest.mark.parametrize("from_logits", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_matches_keras_categorical_crossentropy_on_one_hot_labels(from_logits, smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(16, 7)).astype("float32")
    y_pred = logits if from_logits else keras.ops.convert_to_numpy(keras.ops.softmax(logits))
    labels = rng.integers(0, 7, 16)
    expected = keras.losses.CategoricalCrossentropy(label_smoothing=smoothing, from_logits=from_logits)(
        np.eye(7, dtype="float32")[labels], y_pred)
    got = SparseCategoricalCrossentropy(label_smoothing=smoothing, from_logits=from_logits)(labels, y_pred)
    np.testing.assert_allclose(float(got), float(expected), rtol=1e-5)
    # (batch, 1) labels, as Keras' sparse losses accept them.
    got = SparseCategoricalCrossentropy(label_smoothing=smoothing, from_logits=from_logits)(labels[:, None], y_pred)
    np.testing.assert_allclose(float(got), float(expected), rtol=1e-5)


def test_round_trips_through_keras_serialization():
    loss = SparseCategoricalCrossentropy(label_smoothing=0.2, from_logits=True)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored, SparseCategoricalCrossentropy)
    assert restored.label_smoothing == 0.2 and restored.from_logits


@pytest.mark.parametrize("bad", [-0.1, 1.0, True])
def test_bad_smoothing_names_the_value(bad):
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        SparseCategoricalCrossentropy(label_smoothing=bad)


def test_tasks_without_class_labels_refuse_smoothing():
    assert isinstance(get_task("classification").build_loss(0.1), SparseCategoricalCrossentropy)
    with pytest.raises(ValueError, match="label_smoothing applies to class labels"):
        get_task("forecast").build_loss(0.1)
