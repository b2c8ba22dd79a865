"""The table layers against independent references: numpy formulas (Gorishniy et al. 2022's PLR,
TabM-mini's members), the parameter formulas of the papers, a `.keras` round trip, and the same
saved model on another Keras backend (the layers are written in `keras.ops`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

import zoo
from zoo.architectures.ensemble import EnsembleAdapter, EnsembleDense
from zoo.architectures.numeric_embedding import PeriodicEmbedding

ROOT = Path(__file__).resolve().parents[2]


def _plr_reference(x, frequency, kernel, bias, numeric):
    """PLR in plain numpy, one feature at a time, as the paper writes it (section 3.3)."""
    parts = []
    for j in range(numeric):
        v = 2 * np.pi * x[:, j:j + 1] * frequency[j]                   # (batch, k)
        periodic = np.concatenate([np.cos(v), np.sin(v)], axis=1)      # (batch, 2k)
        parts.append(np.maximum(periodic @ kernel[j] + bias[j], 0))    # (batch, units)
    return np.concatenate(parts + [x[:, numeric:]], axis=1)


@pytest.mark.parametrize("numeric", [None, 3])
def test_periodic_embedding_matches_the_paper_formula(numeric):
    x = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")
    layer = PeriodicEmbedding(numeric, frequencies=6, units=5, sigma=1.0)
    y = keras.ops.convert_to_numpy(layer(x))
    n = 4 if numeric is None else numeric
    frequency, kernel, bias = (keras.ops.convert_to_numpy(w) for w in (layer.frequency, layer.kernel, layer.bias))
    assert frequency.shape == (n, 6) and kernel.shape == (n, 12, 5) and bias.shape == (n, 5)
    assert y.shape == layer.compute_output_shape((5, 4)) == (5, n * 5 + 4 - n)
    np.testing.assert_allclose(y, _plr_reference(x, frequency, kernel, bias, n), rtol=1e-5, atol=1e-5)
    # The initial frequencies are N(0, sigma^2).
    wide = PeriodicEmbedding(frequencies=64, sigma=0.1)
    wide.build((None, 50))
    assert 0.09 < np.std(keras.ops.convert_to_numpy(wide.frequency)) < 0.11


def test_ensemble_layers_match_per_member_numpy():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4)).astype("float32")
    adapter = EnsembleAdapter(5)
    copies = keras.ops.convert_to_numpy(adapter(x))
    r = keras.ops.convert_to_numpy(adapter.r)
    assert set(np.unique(r)) <= {-1.0, 1.0}  # TabM-mini's random signs
    np.testing.assert_allclose(copies, x[:, None, :] * r[None], rtol=1e-6)
    head = EnsembleDense(5, 2)
    y = keras.ops.convert_to_numpy(head(copies))
    kernel, bias = keras.ops.convert_to_numpy(head.kernel), keras.ops.convert_to_numpy(head.bias)
    expected = np.stack([copies[:, i] @ kernel[i] + bias[i] for i in range(5)], axis=1)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_tabular_mlp_params_match_the_formula():
    features, numeric, k, units, width, classes, members = 12, 8, 16, 16, 64, 3, 4
    embedded = numeric * units + features - numeric
    plr = numeric * (k + 2 * k * units + units)
    mlp = (embedded * width + width) + 2 * (width * width + width)
    single = zoo.build("tabular_mlp", input_shape=(features,), num_classes=classes, numeric_features=numeric,
                       width=width)
    assert single.count_params() == plr + mlp + width * classes + classes
    ensemble = zoo.build("tabular_mlp", input_shape=(features,), num_classes=classes, numeric_features=numeric,
                         width=width, members=members)
    assert ensemble.count_params() == plr + members * embedded + mlp + members * (width * classes + classes)


def test_tabular_mlp_ensemble_predicts_the_mean_of_its_members():
    model = zoo.build("tabular_mlp", input_shape=(6,), num_classes=3, members=4, width=32, dropout=0.0)
    x = np.random.default_rng(2).normal(size=(7, 6)).astype("float32")
    members = keras.Model(model.inputs, model.get_layer("head_member_predictions").output)(x)
    members = keras.ops.convert_to_numpy(members)
    assert members.shape == (7, 4, 3)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(x)), members.mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(members.sum(axis=-1), 1.0, rtol=1e-5)  # each member a softmax


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="frequencies=0"):
        PeriodicEmbedding(frequencies=0)
    with pytest.raises(ValueError, match="members=0"):
        EnsembleAdapter(0)
    with pytest.raises(ValueError, match="embedding='quantile'"):
        zoo.build("tabular_mlp", embedding="quantile")
    with pytest.raises(ValueError, match="numeric_features=40"):
        zoo.build("tabular_mlp", numeric_features=40)


def _saved_model(path):
    model = zoo.build("tabular_mlp", input_shape=(5,), num_classes=3, numeric_features=3, members=2, width=16,
                      frequencies=4, embedding_units=3, sigma=1.0)
    model.save(path)
    return model


def test_keras_round_trip_gives_the_same_outputs(tmp_path):
    path = tmp_path / "tabular_mlp.keras"
    model = _saved_model(path)
    x = np.random.default_rng(3).normal(size=(4, 5)).astype("float32")
    loaded = keras.saving.load_model(path)
    assert [type(layer).__name__ for layer in loaded.layers if "embedding" in layer.name or "ensemble" in layer.name] \
        == ["PeriodicEmbedding", "EnsembleAdapter"]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_saved_model_runs_the_same_on_another_backend(tmp_path, backend):
    """The layers are keras.ops only: the same `.keras` file gives the same outputs on JAX and PyTorch
    (another process each: the backend is chosen per process)."""
    path = tmp_path / "tabular_mlp.keras"
    model = _saved_model(path)
    x = np.random.default_rng(3).normal(size=(4, 5)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    code = ("import json, sys, numpy as np, keras, zoo.architectures; m = keras.saving.load_model(sys.argv[1]); "
            "print(keras.backend.backend(), json.dumps(keras.ops.convert_to_numpy(m(np.load(sys.argv[2]))).tolist()))")
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "x.npy")],
                         capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    name, values = out.stdout.strip().splitlines()[-1].split(" ", 1)
    assert name == backend
    np.testing.assert_allclose(np.asarray(json.loads(values)), keras.ops.convert_to_numpy(model(x)),
                               rtol=1e-4, atol=1e-5)
