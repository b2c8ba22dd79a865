"""`zoo.deploy.formats.tfjs_large`: a large model's TF.js conversion with the weights kept out of the graph while
it is optimized (issue 40: convnext_xlarge's TF.js was estimated at 28 GB). Its memory is measured by
`python -m benchmarks.large_export` (`results/export_memory/`); here, on small models forced onto the route, the
graph model is run in tfjs (Node) against Keras, and each weight is written once."""

import numpy as np
import pytest

import zoo
from zoo.deploy.formats import tfjs_large
from zoo.deploy.formats.memory import weight_bytes
from zoo.deploy.formats.saved_model import export_saved_model
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE, SERVING_TAG
from zoo.deploy.formats.tfjs import TFJSRunner, node_runtime

SETTINGS = dict(signature_def=SERVING_SIGNATURE, saved_model_tags=SERVING_TAG)


@pytest.mark.slow  # a conversion and a Node run: ~20 s
def test_a_model_converted_with_its_weights_apart_runs_in_tfjs_as_keras_does(tmp_path):
    """convnet_bn: batch norms that the converter would fold into the convolutions stay ops on this route."""
    node_runtime()
    model = zoo.build("convnet_bn")
    export_saved_model(model, tmp_path / "saved_model")
    assert tfjs_large.convert(str(tmp_path / "saved_model"), str(tmp_path / "tfjs"), **SETTINGS)
    x = np.random.default_rng(0).random((8, *model.input_shape[1:]), dtype=np.float32)
    runner = TFJSRunner(tmp_path / "tfjs")
    (got,) = runner.predict({runner.input_names[0]: x}).values()
    np.testing.assert_allclose(got, np.asarray(model(x)), atol=1e-5)
    written = sum(p.stat().st_size for p in (tmp_path / "tfjs").glob("*.bin"))
    assert weight_bytes(model) <= written < weight_bytes(model) + 64 * 1024  # each weight once, and small constants
    entries = [{"name": str(i), "data": np.zeros(n, np.float32)} for i, n in enumerate((10, 2**26, 2**25, 3))]
    assert [[e["name"] for e in g] for g in tfjs_large._groups(entries)] == [["0"], ["1"], ["2", "3"]]


@pytest.mark.slow
def test_a_model_with_a_lookup_table_is_left_to_the_converter(tmp_path):
    from benchmarks import keras_export_cases as cases

    model, _ = cases.build(cases.BY_NAME["text_vectorization"])
    export_saved_model(model, tmp_path / "saved_model")
    assert not tfjs_large.convert(str(tmp_path / "saved_model"), str(tmp_path / "tfjs"), **SETTINGS)
    assert not (tmp_path / "tfjs").exists()

