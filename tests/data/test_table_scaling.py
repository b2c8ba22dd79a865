"""Robust scaling and smooth clipping (RealMLP-TD's numeric preprocessing) against scikit-learn's
`RobustScaler` and numpy, and built into a model by `zoo.data.from_path`."""

from __future__ import annotations

import keras
import numpy as np
import pandas as pd
import pytest

import zoo.data
from zoo.data.table_scaling import SmoothClip, fit_robust_scaling


def test_robust_scaling_matches_sklearn_robust_scaler_and_falls_back_to_the_range():
    from sklearn.preprocessing import RobustScaler

    rng = np.random.default_rng(0)
    x = np.stack([rng.lognormal(size=200), rng.normal(5, 2, 200), np.r_[np.zeros(190), np.arange(1, 11)],
                  np.full(200, 7.0)], axis=1)
    center, scale = fit_robust_scaling(x)
    reference = RobustScaler().fit(x)
    np.testing.assert_allclose(center, reference.center_)
    np.testing.assert_allclose(scale[:2], reference.scale_[:2])
    # Column 2 is mostly zeros (quartiles equal): half its range; column 3 is constant: 1.
    np.testing.assert_allclose(scale[2:], [5.0, 1.0])


def test_smooth_clip_is_the_formula_and_round_trips(tmp_path):
    x = np.array([[-100.0, -3.0, 0.0, 0.5, 3.0, 1e6]], np.float32)
    expected = x / np.sqrt(1 + (x / 3) ** 2)
    layer = SmoothClip()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x)), expected, rtol=1e-6)
    assert np.all(np.abs(expected) <= 3) and abs(expected[0, 3] - 0.5) < 0.01  # near-identity at 0, bounded
    model = keras.Sequential([keras.Input((6,)), SmoothClip(2.0, name="clip")])
    model.save(tmp_path / "clip.keras")
    loaded = keras.saving.load_model(tmp_path / "clip.keras")
    assert loaded.get_layer("clip").bound == 2.0
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)), x / np.sqrt(1 + (x / 2) ** 2), rtol=1e-6)
    with pytest.raises(ValueError, match="bound=0"):
        SmoothClip(0)


def test_from_path_fits_robust_scaling_on_train_rows_and_the_model_applies_it(tmp_path):
    from sklearn.preprocessing import RobustScaler

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"a": rng.lognormal(size=300), "b": rng.normal(size=300), "town": rng.choice(["n", "s"], 300)})
    frame["label"] = (frame["a"] > 1).astype(int)
    frame.to_csv(tmp_path / "t.csv", index=False)
    data = zoo.data.from_path(tmp_path / "t.csv", seed=0)
    r = data.raw_input
    assert (r.scaling, r.clip) == ("robust", 3.0) and "scaling" in [i.name for i in data.inferences]
    x_train = np.concatenate([x["numeric"] for x, _ in data.splits.dataset("train", shuffle=False).as_numpy_iterator()])
    reference = RobustScaler().fit(x_train)
    np.testing.assert_allclose(r.mean, reference.center_, rtol=1e-6)
    np.testing.assert_allclose(r.std, reference.scale_, rtol=1e-6)
    inputs = r.inputs()
    model = keras.Model(inputs, r.transform(inputs))
    rows = {"categorical": np.array([["n"], ["s"]], dtype=object).astype(str), "numeric": x_train[:2]}
    z = reference.transform(x_train[:2])
    expected = np.concatenate([z / np.sqrt(1 + (z / 3) ** 2), [[0, 1, 0], [0, 0, 1]]], axis=1)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(rows)), expected, rtol=1e-5, atol=1e-6)
    standard = zoo.data.from_path(tmp_path / "t.csv", seed=0, scaling="standard").raw_input
    assert (standard.scaling, standard.clip) == ("standard", None)
    np.testing.assert_allclose(standard.mean, x_train.mean(axis=0), rtol=1e-6)
