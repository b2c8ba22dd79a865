"""`python scripts/benchmark.py quantization-search`: every candidate is a valid training run, and bad names fail early."""

import argparse

import keras
import pytest

import zoo
from benchmarks import quantization_search as search
from zoo.data.registry import find_spec
from zoo.errors import UnknownNameError
from zoo.training import load_recipe
from zoo.training.config import DEFAULT_RECIPE


@pytest.mark.parametrize("name", sorted(search.CANDIDATES))
def test_every_candidate_is_a_recipe_run_that_builds(name):
    # A stale candidate (a renamed override, a model that lost an argument) fails here, not an hour into a run.
    config = load_recipe(DEFAULT_RECIPE, **search.CANDIDATES[name].changes)
    spec = find_spec(config.dataset)
    keras.backend.clear_session()
    with keras.StatelessScope():  # the graph without allocating its weights: what a stale argument breaks
        model = zoo.build(config.model, input_shape=spec.input_shape, num_classes=spec.num_classes,
                          **config.model_overrides)
    assert model.output_shape == (None, spec.num_classes)


def test_unknown_candidate_or_runtime_is_named_with_suggestions():
    parser = argparse.ArgumentParser()
    search.add_arguments(parser)
    with pytest.raises(UnknownNameError, match="Did you mean: lenet5"):
        search.run(parser.parse_args(["--models", "lenet"]))
    with pytest.raises(UnknownNameError, match="openvino"):
        search.run(parser.parse_args(["--runtimes", "openvino"]))


def test_a_partial_run_replaces_its_rows_and_keeps_the_others(tmp_path):
    import json

    def row(model, runtime, acc):
        return {"model": model, "runtime": runtime, "int8": acc}

    previous = tmp_path / "ptq_search.json"
    old_rows = [row("lenet5", "tflite", 0.1), row("lenet5", "onnx", 0.2), row("mlp", "tflite", 0.3),
                row("retired_candidate", "tflite", 0.4)]
    previous.write_text(json.dumps({"settings": {"seed": 0}, "machine": search.machine(), "rows": old_rows}))
    merged = search._merged([row("lenet5", "tflite", 0.9)], previous, seed=0)
    assert merged == [row("lenet5", "tflite", 0.9), row("lenet5", "onnx", 0.2), row("mlp", "tflite", 0.3)]
    # Another seed's table is not mixed in.
    assert search._merged([row("lenet5", "tflite", 0.9)], previous, seed=1) == [row("lenet5", "tflite", 0.9)]
