"""The inference benchmark's smoke test and the FLOP counter against hand counts and papers.

No timing is asserted: the machine is shared. The benchmark run is `--quick` on lenet5 with a
few runtimes (~30 s).
"""

import argparse

import keras
import numpy as np
import pytest

from benchmarks import inference
from benchmarks.flops import flops_by_layer, forward_flops


def test_flops_of_a_tiny_model_match_a_hand_count():
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, padding="valid", use_bias=False, name="conv")(inputs)  # 6x6x4 out
    x = keras.layers.Flatten(name="flatten")(x)
    outputs = keras.layers.Dense(5, name="dense")(x)  # 144 -> 5, with bias
    model = keras.Model(inputs, outputs)
    conv = 2 * (6 * 6 * 4) * (3 * 3 * 3)
    dense = 2 * 144 * 5 + 5
    assert dict(flops_by_layer(model)) == {"conv": conv, "flatten": 0, "dense": dense}
    assert forward_flops(model) == conv + dense
    assert forward_flops(model, (10, 10, 3)) == 2 * (8 * 8 * 4) * 27 + 2 * 256 * 5 + 5


def test_lstm_counts_every_time_step():
    inputs = keras.Input((7, 3))
    outputs = keras.layers.LSTM(4, use_bias=False, name="lstm")(inputs)
    per_step = 2 * (3 + 4) * 4 * 4 + 26 * 4  # four gates' products + gate maths
    assert forward_flops(keras.Model(inputs, outputs)) == 7 * per_step


def test_resnet50_and_mobilenet_v2_match_their_papers():
    import zoo

    # He et al. 2016 Table 1: 3.8e9 multiply-adds (keras.applications' v1 layout: 3.86 G); 2 FLOPs each,
    # plus ~1% element-wise work.
    r50 = forward_flops(zoo.build("resnet50"))
    assert r50 == pytest.approx(2 * 3.86e9, rel=0.03)
    # Sandler et al. 2018 Table 4: 300 M multiply-adds.
    assert forward_flops(zoo.build("mobilenet_v2")) == pytest.approx(2 * 300e6, rel=0.06)


@pytest.fixture(scope="module")
def quick_result():
    parser = argparse.ArgumentParser()
    inference.add_arguments(parser)
    args = parser.parse_args(["--quick", "--models", "lenet5",
                              "--runtimes", "keras_call,litert_fp32,litert_int8,onnx,keras_onnx",
                              "--threads", "1", "--profile", "none"])
    return inference.run(args)


# The quick run exports and times lenet5 in five runtimes: under -m slow, like the suites it smoke-tests
# (`python scripts/benchmark.py inference --quick`); the FLOP counts above run by default.
@pytest.mark.slow
def test_quick_run_has_a_positive_row_per_runtime_and_batch(quick_result):
    rows = quick_result["rows"]
    assert {(r["runtime"], r["batch"]) for r in rows} == {
        (rt, b) for rt in ("keras_call", "litert_fp32", "litert_int8", "onnx", "keras_onnx") for b in (1, 32)}
    for r in rows:
        assert r["status"] == "ok", r
        assert r["throughput_per_s"] > 0 and r["median_ms"] > 0
        assert r["parity_ok"], r  # within the export tolerance of its precision
        assert 0 <= r["accuracy"] <= 1
    assert quick_result["peak"]["gflops"] > 0
    import zoo

    assert quick_result["models"]["lenet5"]["flops_per_sample"] == forward_flops(zoo.build("lenet5"))


@pytest.mark.slow
def test_quick_run_summarises(quick_result, tmp_path):
    import json

    json.dumps(quick_result)  # JSON-serialisable
    targets = quick_result["targets"]
    assert targets["speedup_vs_predict"] == []  # keras_predict was not run
    assert {t["model"] for t in targets["int8_vs_fp32"]} == {"lenet5"}
    assert [p["peer"] for p in targets["peers"]] == ["keras_onnx", "keras_onnx"]
    text = inference.markdown(quick_result)
    assert "## Targets" in text and "## lenet5" in text
    paths = inference.plots(quick_result, tmp_path)
    assert {p.name for p in paths} == {"inference.csv", "inference_latency.png", "inference_throughput.png",
                                       "inference_efficiency.png"}
    assert all(p.stat().st_size > 0 for p in paths)
    assert len(np.loadtxt(tmp_path / "inference.csv", delimiter=",", dtype=str, usecols=0)) == 1 + len(
        quick_result["rows"])
