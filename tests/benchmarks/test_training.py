"""The training benchmark's smoke test: structure, a fair comparison (parity), the PyTorch peer's model.

No timing is asserted: the numbers depend on the machine and its load.
"""

import argparse

import pytest

from benchmarks import time_to_accuracy, training


def quick_args(**changes):
    parser = argparse.ArgumentParser()
    training.add_arguments(parser)
    args = parser.parse_args(["--quick", "--families", "cnn", "--efficiency-batch", "0", "--no-torch",
                              "--models", "mlp", "--pipelines", "table"])
    for k, v in changes.items():
        setattr(args, k, v)
    return args


@pytest.fixture(scope="module")
def quick_result(real_mnist_dir):
    return training.run(quick_args())


# The quick run times convnet_bn's fits, a table pipeline and an MLP against stock Keras: under -m slow, like
# the suite it smoke-tests (`python scripts/benchmark.py training --quick`); the pieces below run by default.
@pytest.mark.slow
def test_quick_suite_structure(quick_result, tmp_path):
    (row,) = quick_result["throughput"]
    assert row["family"] == "cnn" and row["model"] == "convnet_bn" and row["variant"] == "fp32"
    assert "error" not in row
    assert row["zoo_samples_per_s"] > 0 and row["keras_samples_per_s"] > 0
    assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
    (pipe,) = quick_result["pipeline"]
    assert pipe["source"] == "table" and pipe["first_epoch_samples_per_s"] > 0 and pipe["headroom"] > 0
    (mlp,) = quick_result["models"]
    assert mlp["model"] == "mlp" and mlp["baseline"] == "stock Keras layers" and mlp["identical_initial_weights"]
    assert mlp["train_gflops"] > 0 and mlp["top_ops"] and mlp["parity"]["abs_diff"] <= training.PARITY_TOLERANCE
    assert quick_result["machine"]["cpus"] >= 1
    text = training.markdown(quick_result)
    assert "zoo/Keras" in text and "headroom" in text
    paths = training.plots(quick_result, tmp_path)
    assert paths and all(p.is_file() and p.stat().st_size > 0 for p in paths)


@pytest.mark.slow
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
    torch_peer = pytest.importorskip("benchmarks.torch_peer")
    pytest.importorskip("torch")
    from zoo.architectures import registry

    keras_model = registry.build("convnet_bn", input_shape=(28, 28, 1), num_classes=10)
    assert torch_peer.count_params(torch_peer.convnet_bn_torch()) == keras_model.count_params()


def test_torch_peer_skips_cleanly_without_torch(monkeypatch):
    from benchmarks import torch_peer

    monkeypatch.setattr(torch_peer, "torch_version", lambda: None)
    result = torch_peer.run(training.recipe_config("mnist_fast", "fp32"), training.Settings())
    assert "torch is not installed" in result["skipped"]


def test_time_to_accuracy_report_from_a_recorded_result(tmp_path):
    """summarize/markdown/plots work on a result without training (the numbers are made up)."""
    result = {
        "recipe": "mnist_speedrun", "target_test_accuracy": 0.99, "target_speedup": 10.0, "seeds": [0, 1],
        "machine": {"cpus": 2, "tensorflow": "x"}, "baseline_epoch_budget": 15,
        "runs": [
            {"name": "zoo:mnist_speedrun", "seed": 0, "epochs": [(1, 4.0, 0.9916)], "cpu_s": [6.0],
             "time_to_target_s": 4.0, "cpu_to_target_s": 6.0, "epochs_to_target": 1},
            {"name": time_to_accuracy.BASELINE, "seed": 0, "epochs": [(1, 8.0, 0.97), (9, 48.0, 0.991)],
             "cpu_s": [12.0, 80.0], "time_to_target_s": 48.0, "cpu_to_target_s": 80.0, "epochs_to_target": 9},
            {"name": time_to_accuracy.BASELINE, "seed": 1, "epochs": [(1, 8.0, 0.97), (7, 36.0, 0.9902)],
             "cpu_s": [12.0, 60.0], "time_to_target_s": 36.0, "cpu_to_target_s": 60.0, "epochs_to_target": 7},
            {"name": "zoo:mnist_speedrun", "seed": 1, "epochs": [(1, 4.5, 0.9921)], "cpu_s": [6.5],
             "time_to_target_s": 4.5, "cpu_to_target_s": 6.5, "epochs_to_target": 1},
        ],
    }
    result.update(time_to_accuracy.summarize(result))
    assert [p["speedup"] for p in result["pairs"]] == [12.0, 8.0]
    assert result["worst_speedup"] == 8.0 and not result["passed"] and not result["passed_wall"]
    assert [p["cpu_speedup"] for p in result["pairs"]] == [13.33, 9.23] and not result["passed_cpu"]
    text = time_to_accuracy.markdown(result)
    assert "8.0x" in text and "missed" in text
    (png,) = time_to_accuracy.plots(result, tmp_path)
    assert png.is_file()


def test_parity_fits_run_the_same_batches_whatever_the_steps_per_execution():
    """A zoo model compiled with 8 steps per call against the plain one at 1: both fits must see the same
    16 batches, or their losses part (a broken rounding would give the baseline 5 batches)."""
    from benchmarks import model_efficiency
    from benchmarks.fit_timing import execution_multiple, parity_fits

    assert [execution_multiple(n, *models) for n, models in ((4, ()), (5, ("a",)))] == [4, 5]
    case = model_efficiency.ModelCase((6, 4), 16, recipe="mnist_lstm")  # the recipe's 8 steps per call, unrolled
    zoo_model, plain = model_efficiency.build_pair("lstm_classifier", case)
    assert (zoo_model.steps_per_execution, plain.steps_per_execution) == (8, 1)
    assert zoo_model.get_layer("lstm1").unroll and plain.get_layer("lstm1").unroll  # the same graph
    assert execution_multiple(5, zoo_model, plain) == 8
    parity, _ = parity_fits(zoo_model, plain, model_efficiency.synthetic_batches((6, 4), 16), parity_steps=5)
    assert parity["steps"] == 16 and parity["abs_diff"] <= training.PARITY_TOLERANCE, parity


def test_a_variant_case_builds_its_registered_model_with_its_options_in_both_fits():
    """`convnet_bn_32_64_64` is convnet_bn with other filters: zoo's model and the stock baseline both."""
    from benchmarks import model_efficiency

    variant = model_efficiency.CASES["convnet_bn_32_64_64"]
    assert variant.model == "convnet_bn" and variant.runtime()["model_overrides"] == {"filters": (32, 64, 64)}
    case = model_efficiency.ModelCase((8, 8, 3), 4, recipe="mnist_speedrun", model="convnet_bn",
                                      overrides=(("filters", (4, 8)),))
    assert case.runtime()["model_overrides"] == {"filters": (4, 8), "padding": "valid", "dropout": 0.0}
    for model in model_efficiency.build_pair("convnet_bn", case):
        assert [model.get_layer(f"stage{i}_conv").filters for i in (1, 2)] == [4, 8]
        assert model.get_layer("stage1_conv").padding == "valid"


def test_conv_ceiling_times_each_convolution_as_training_runs_it():
    """Every Conv2D, alone at its shapes; the first (fed by the model's input) without an input gradient."""
    import keras

    from benchmarks import conv_ceiling

    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, padding="same")(inputs)
    x = keras.layers.Conv2D(6, 3, strides=2, name="second")(keras.layers.ReLU()(x))
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(x)))
    first, second = (layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D))
    assert [len(conv_ceiling._conv_step(layer, 2, gradient)()) for layer, gradient in
            ((first, False), (second, True))] == [2, 3]  # the output, then the gradients
    result = conv_ceiling.conv_ceiling(model, 2, train_flops_per_sample=1e6, peak_gflops_per_cpu_s=100, reps=2)
    assert result["conv_layers"] == 2 and result["conv_cpu_ms_per_step"] > 0
    expected = 100 * (1e6 * 2 / (result["conv_cpu_ms_per_step"] / 1e3) / 1e9) / 100
    assert abs(result["ceiling_percent_of_peak_per_cpu_s"] - expected) <= 0.05 * expected + 0.1
    assert conv_ceiling.conv_ceiling(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), 2, 1.0, 1.0) is None
