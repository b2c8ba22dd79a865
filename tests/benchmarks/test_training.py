"""The training benchmark's smoke test: structure, a fair comparison (parity), the PyTorch peer's model.

No timing is asserted: the numbers depend on the machine and its load.
"""

import argparse

import pytest

from zoo.benchmarks import time_to_accuracy, training


def quick_args(**changes):
    parser = argparse.ArgumentParser()
    training.add_arguments(parser)
    args = parser.parse_args(["--quick", "--families", "cnn", "--efficiency-batch", "0", "--no-torch"])
    for k, v in changes.items():
        setattr(args, k, v)
    return args


@pytest.fixture(scope="module")
def quick_result(real_mnist_dir):
    return training.run(quick_args())


def test_quick_suite_structure(quick_result, tmp_path):
    (row,) = quick_result["throughput"]
    assert row["family"] == "cnn" and row["model"] == "convnet_bn" and row["variant"] == "fp32"
    assert "error" not in row
    assert row["zoo_samples_per_s"] > 0 and row["keras_samples_per_s"] > 0
    assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
    (pipe,) = quick_result["pipeline"]
    assert pipe["samples_per_s"] > 0 and pipe["headroom"] > 0
    assert quick_result["machine"]["cpus"] >= 1
    text = training.markdown(quick_result)
    assert "zoo/Keras" in text and "headroom" in text
    paths = training.plots(quick_result, tmp_path)
    assert paths and all(p.is_file() and p.stat().st_size > 0 for p in paths)


def test_zoo_and_keras_fits_start_equal_and_train_equal(quick_result):
    """The comparison is fair: same initial weights, same batches, same loss after the same steps."""
    (row,) = quick_result["throughput"]
    assert row["identical_initial_weights"]
    parity = row["parity"]
    assert parity["steps"] >= 1
    assert parity["abs_diff"] <= training.PARITY_TOLERANCE, parity


def test_plain_keras_twin_is_not_a_zoo_model(real_mnist_dir):
    from zoo.core.model import ZooModel

    config = training.recipe_config("mnist_mlp", "fp32")
    zoo_model, plain = training.build_pair(config, steps_per_epoch=10)
    assert isinstance(zoo_model, ZooModel) and not isinstance(plain, ZooModel)
    assert type(plain).train_step is not ZooModel.train_step
    assert plain.count_params() == zoo_model.count_params()


def test_torch_peer_matches_convnet_bn():
    torch_peer = pytest.importorskip("zoo.benchmarks.torch_peer")
    pytest.importorskip("torch")
    from zoo.architectures import registry

    keras_model = registry.build("convnet_bn", input_shape=(28, 28, 1), num_classes=10)
    assert torch_peer.count_params(torch_peer.convnet_bn_torch()) == keras_model.count_params()


def test_torch_peer_skips_cleanly_without_torch(monkeypatch):
    from zoo.benchmarks import torch_peer

    monkeypatch.setattr(torch_peer, "torch_version", lambda: None)
    result = torch_peer.run(training.recipe_config("mnist_fast", "fp32"), training.Settings())
    assert "torch is not installed" in result["skipped"]


def test_time_to_accuracy_report_from_a_recorded_result(tmp_path):
    """markdown/plots work on a result without training (the numbers are made up)."""
    result = {
        "recipe": "mnist_fast", "target_test_accuracy": 0.99, "target_seconds": 15.0, "seeds": [0],
        "machine": {"cpus": 2, "tensorflow": "x"}, "worst_time_to_target_s": 12.0, "passed": True,
        "speedup_vs_baseline": 4.0, "baseline_reached_target": True, "baseline_epoch_budget": 10,
        "runs": [
            {"name": "zoo:mnist_fast", "seed": 0, "epochs": [(1, 6.0, 0.985), (2, 12.0, 0.9905)],
             "time_to_target_s": 12.0, "epochs_to_target": 2},
            {"name": "keras.io simple convnet", "seed": 0, "epochs": [(1, 8.0, 0.97), (9, 48.0, 0.991)],
             "time_to_target_s": 48.0, "epochs_to_target": 9},
        ],
    }
    text = time_to_accuracy.markdown(result)
    assert "12.0" in text and "met" in text
    (png,) = time_to_accuracy.plots(result, tmp_path)
    assert png.is_file()
