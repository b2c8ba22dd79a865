"""The `zoo train --data` table default exports to every format with its preprocessing inside.

The model `zoo.training.own_data` builds for a CSV with numeric and text columns: robust scaling
(`Rescaling` with the fitted constants), `SmoothClip`, `CategoryOneHot` and `tabular_mlp`'s
`PeriodicEmbedding` and TabM-mini ensemble (a small table gets 8 members), untrained (every runtime must agree with Keras on the same weights). Each
format's verification runs the artifact in its runtime against Keras on real rows of the table.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import zoo  # noqa: E402
from zoo.deploy.formats import FORMATS  # noqa: E402


def _table(tmp_path, categorical: bool):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"area": rng.lognormal(4, 0.5, 80), "floor": rng.integers(0, 9, 80),
                          "age": rng.normal(30, 10, 80)})
    if categorical:
        frame["town"] = rng.choice(["north", "south", "east"], 80)
    frame["label"] = np.where(frame["area"] > 55, "big", "small")
    path = tmp_path / "flats.csv"
    frame.to_csv(path, index=False)
    return path


# OpenVINO 2026.4 cannot convert the string lookup of a text column (`CategoryOneHot`'s StringLookup):
# "Conversion is failed for: HashTableV2, LookupTableFindV2". Tables with numeric columns only export to it.
NO_TEXT_COLUMNS = {"openvino"}


def _export(tmp_path, categorical: bool, formats):
    from zoo.training import own_data, planner

    config, data = planner.config_for_data(str(_table(tmp_path, categorical)), log=lambda line: None,
                                            model_overrides={"width": 16, "depth": 1})
    assert config.model == "tabular_mlp"
    model = own_data.build_model(config, data)
    names = {layer.name for layer in model.layers} | {layer.name for layer in model.get_layer("tabular_mlp").layers}
    assert {"standardize", "smooth_clip", "periodic_embedding", "ensemble_adapter", "head_members"} <= names
    formats = tuple(f for f in formats if not (categorical and f in NO_TEXT_COLUMNS))
    report = zoo.deploy.export.export(model, tmp_path / "out", formats, latency_runs=0)
    assert report.ok, report.table()
    assert {r.format for r in report.results} == set(formats)


def test_table_default_with_a_text_column_exports_to_onnx_and_tflite(tmp_path):
    """The converters that rewrite most: the embedding's cos, sin and batched matmul, the string lookup."""
    _export(tmp_path, True, ("onnx", "tflite"))


@pytest.mark.slow
@pytest.mark.parametrize("categorical", [False, True], ids=["numeric", "with-text-column"])
def test_table_default_exports_and_verifies_in_every_format(tmp_path, categorical):
    _export(tmp_path, categorical, tuple(FORMATS))


def test_a_saved_table_default_loads_and_predicts_in_a_fresh_process(tmp_path):
    """`zoo predict` on the `.keras` file in a new process: every layer the table default holds is registered
    by the modules the loaders import (SmoothClip and CategoryOneHot: zoo.data.table_scaling)."""
    import subprocess
    import sys
    from pathlib import Path

    from zoo.training import own_data, planner

    csv = _table(tmp_path, categorical=False)
    config, data = planner.config_for_data(str(csv), log=lambda line: None, model_overrides={"width": 16})
    model = own_data.build_model(config, data)
    model.save(tmp_path / "m.keras")
    rows = pd.read_csv(csv).drop(columns="label").iloc[:4]
    rows.to_csv(tmp_path / "rows.csv", index=False)
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-m", "zoo", "predict", str(tmp_path / "m.keras"), str(tmp_path / "rows.csv"),
                          "--format", "csv", "--out", str(tmp_path / "p.csv")], capture_output=True, text=True,
                         timeout=600, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr[-3000:]
    predicted = pd.read_csv(tmp_path / "p.csv")
    expected = model.predict(rows.to_numpy(np.float32), verbose=0)
    assert len(predicted) == 4
    np.testing.assert_allclose(predicted[["score_big", "score_small"]].to_numpy(), expected, rtol=1e-4, atol=1e-5)
    assert list(predicted["class"]) == [("big", "small")[i] for i in expected.argmax(-1)]
