"""The model cases of Keras 3's own export tests (keras-team/keras `keras/src/export/*_test.py`) through
`zoo.export` (issue 40): each case is built as its Keras test builds it (`benchmarks.keras_export_cases.CASES`,
each naming its source test), and each artifact is run here in its runtime's own API and compared with Keras's
`model(x)`, independently of zoo's verification.

The default run takes one case of each kind in the format it exercises most; the full grid, every case in every
format with `model.export` beside it, is `test_every_case_in_every_format` (slow) and
`python -m benchmarks.keras_export_cases` (the committed table, `benchmarks/results/keras_export_cases.md`).
"""

import json
import re
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest

import zoo.deploy.export
from benchmarks import keras_export_cases as cases
from tests.deploy.export.test_user_models import RAW
from zoo.deploy.export import ExportData
from zoo.deploy.export.verify import compare
from zoo.deploy.formats.trace import name_outputs

FLOAT32 = 1e-4


def _openvino_outputs(path, x):
    import openvino as ov

    compiled = ov.Core().compile_model(str(next(Path(path).glob("*.xml"))), "CPU")
    result = compiled({name: value for name, value in x.items()})
    return {o.any_name: np.asarray(result[o]) for o in compiled.outputs}


RUNTIMES = {**RAW, "openvino": _openvino_outputs}


def _export(case, formats, tmp_path, **kw):
    model, x = cases.build(case)
    report = zoo.deploy.export.export(model, tmp_path, formats=list(formats), data=ExportData(test=x), latency_runs=0,
                                      isolate=False, **kw)
    return model, x, report


def _keras(case, model, x) -> dict:
    """Keras's outputs on `x`, called as the Keras test calls the model, named as zoo names them."""
    return {k: np.asarray(v) for k, v in name_outputs(model, case.keras_call(model, x)).items()}


def _check_in_runtime(result, expected, x, stochastic=()):
    got = RUNTIMES[result.format](Path(result.path), x)
    assert sorted(got) == sorted(expected), (result.label, sorted(got))
    for name, ref in expected.items():
        assert np.shape(got[name]) == ref.shape, (result.label, name, np.shape(got[name]))
        if name not in stochastic:
            diff = float(np.max(np.abs(np.asarray(got[name], np.float64) - ref))) if ref.size else 0.0
            assert diff <= FLOAT32 * max(1.0, float(np.max(np.abs(ref)))), (result.label, name, diff)
    return got


# ----------------------------------------------------------------------------- one case of each kind

# kind -> (case, the format its Keras test exercises, held to the suite's time: the cheapest where the test is
# SavedModel's). The LSTM case (an RNN route, tens of seconds) runs in the grid only; RNN exports have their tests
# in tests/deploy/formats.
DEFAULT = {
    "standard": ("sequential", "saved_model"),
    "rescaling": ("rescaling_subclass", "saved_model"),
    "structure": ("input_dict", "onnx"),
    "positional": ("two_positional_inputs", "saved_model"),
    "dynamic_dims": ("dynamic_dims_functional", "onnx"),
    "multi_io": ("dict_input_multi_output", "onnx"),
    "dynamic_hw": ("dynamic_hw_functional", "openvino"),
    "attention": ("multi_head_attention", "saved_model"),
}


@pytest.mark.parametrize("kind", sorted(DEFAULT))
def test_one_case_of_each_kind_matches_keras_in_its_runtime(kind, tmp_path):
    """keras/src/export/{saved_model,onnx,litert}_test.py: the case's source test (`cases.BY_NAME[name].source`)."""
    name, fmt = DEFAULT[kind]
    case = cases.BY_NAME[name]
    model, x, report = _export(case, [fmt], tmp_path)
    (result,) = report.results
    assert result.status == "passed", report.table()
    _check_in_runtime(result, _keras(case, model, x), x)


def test_the_default_run_covers_every_kind_but_text_and_lstm():
    """TextVectorization (saved_model_test.py::test_model_with_lookup_table) has its test beside the text front's
    (`test_text_front.py::test_a_loaded_sequential_splits_at_the_call_its_outputs_come_from`), and the LSTM is the
    grid's; the kinds with behaviour of their own have their tests below."""
    own = {"subclass", "state", "rng", "text", "lstm"}
    assert {c.kind for c in cases.CASES} == set(DEFAULT) | own


# ----------------------------------------------------------------------------- a subclassed model without get_config


def test_subclassed_model_without_get_config_exports_to_every_format_that_needs_no_keras_file(tmp_path):
    """saved_model_test.py::test_standard_model_export (subclass): `CustomModel(layer_list)` takes layers in
    __init__ and has no get_config; Keras exports it to all its formats. zoo failed every one before any work
    (`model_io.has_unrolled_rnn` called get_config)."""
    case = cases.BY_NAME["subclass"]
    model, x, report = _export(case, ["saved_model", "onnx"], tmp_path)
    with pytest.raises(NotImplementedError):
        model.get_config()
    assert [r.status for r in report.results] == ["passed", "passed"], report.table()
    expected = _keras(case, model, x)
    for result in report.results:
        _check_in_runtime(result, expected, x)


def test_a_route_that_needs_the_keras_file_says_so_in_one_line(tmp_path):
    """Where a route rebuilds the model from a .keras file (RNN routes, int8 guards), a model without get_config
    gets one line naming what to implement, not Keras's message starting with an empty line."""
    from zoo.deploy.export.exporter import _save_model
    from zoo.deploy.formats import model_io

    model, _ = cases.build(cases.BY_NAME["subclass"])
    path, why = _save_model(model, tmp_path, needed=True)
    assert path is None
    assert "\n" not in why and why.startswith("CustomModel has no get_config()") and "functional API" in why
    assert not model_io.has_unrolled_rnn(model)  # read from the layers: no get_config asked


# ----------------------------------------------------------------------------- rank-0 outputs, stochastic models


def test_a_rank_0_output_verifies_and_a_counter_is_detected_as_stochastic(tmp_path):
    """saved_model_test.py::test_model_with_non_trainable_state_export: a counter (a 0-d int32 output) beside the
    input passed through. Verification crashed ("zero-dimensional arrays cannot be concatenated")."""
    case = cases.BY_NAME["state_functional"]
    model, x, report = _export(case, ["onnx"], tmp_path)
    (result,) = report.results
    assert result.status == "passed", report.table()
    assert report.model["stochastic_outputs"] == ["output_1"]
    got = _check_in_runtime(result, _keras(case, model, x), x, stochastic=("output_1",))
    assert np.shape(got["output_1"]) == ()
    np.testing.assert_allclose(got["output_0"], next(iter(x.values())), atol=FLOAT32)  # the input, passed through


def test_a_sampling_model_is_verified_on_statistics_and_the_formats_that_cannot_hold_it_say_why(tmp_path):
    """saved_model_test.py::test_model_with_rng_export: a layer adding keras.random.uniform in call(). Compared
    value by value it failed ("max abs diff 0.977") though its SavedModel is right; OpenVINO and TF.js refused in
    their converters' words (OpConversionFailure "Check 'false' failed at ...", "AssertionError: Identity is not
    in graph")."""
    case = cases.BY_NAME["rng_sequential"]
    model, x, report = _export(case, ["saved_model", "openvino", "tfjs"], tmp_path)
    by_format = {r.format: r for r in report.results}
    saved, openvino, tfjs = by_format["saved_model"], by_format["openvino"], by_format["tfjs"]
    assert saved.status == "passed", report.table()
    assert report.model["stochastic_outputs"] == ["output_0"]
    assert "stochastic" in saved.verification.criterion
    assert "**Stochastic**" in (tmp_path / "report.md").read_text()
    expected = _keras(case, model, x)
    got = _check_in_runtime(saved, expected, x, stochastic=("output_0",))
    import tensorflow as tf

    serve = tf.saved_model.load(saved.path)  # one loaded model called twice, as Keras's test does
    first, second = (serve.signatures["serving_default"](**{k: tf.constant(v) for k, v in x.items()})["output_0"]
                     for _ in range(2))
    assert np.max(np.abs(first.numpy() - second.numpy())) > 0.1  # it samples afresh on each call
    noise = got["output_0"] - next(iter(x.values()))
    assert 0 <= noise.min() and noise.max() < 1 and abs(noise.mean() - 0.5) < 0.05  # uniform [0, 1) noise
    for result, op in ((openvino, "StatelessRandomUniformV2"), (tfjs, "AssignVariableOp")):
        assert result.status == "export_failed"
        first = result.error.splitlines()[0]
        assert first.strip() and op in first and re.search(r"'random_layer(_\d+)?' \(RandomLayer\)", first), result.error
        assert "Serve the SavedModel" in result.error
        assert "Check 'false'" not in result.error and "AssertionError" not in result.error


def test_stochastic_outputs_are_held_to_their_statistics_and_the_others_to_their_values():
    rng = np.random.default_rng(0)
    ref = {"noise": rng.random((64, 10)).astype(np.float32), "value": np.ones((64, 1), np.float32)}
    resampled = {"noise": rng.random((64, 10)).astype(np.float32), "value": ref["value"]}
    assert compare(resampled, ref, "float32", stochastic=("noise",)).passed
    assert not compare(resampled, ref, "float32").passed  # value by value it fails
    shifted = {**resampled, "noise": resampled["noise"] + 0.5}
    assert any("mean" in p for p in compare(shifted, ref, "float32", stochastic=("noise",)).problems)
    wrong = {**resampled, "value": ref["value"] + 1}
    assert any("max abs diff" in p for p in compare(wrong, ref, "float32", stochastic=("noise",)).problems)
    scalar = {"count": np.asarray(3.0, np.float32)}
    assert compare({"count": np.asarray(5.0, np.float32)}, scalar, "float32", stochastic=("count",)).passed
    assert not compare({"count": np.asarray(5.0, np.float32)}, scalar, "float32").passed


# ----------------------------------------------------------------------------- TF.js output order


def _alike_outputs():
    """Two outputs alike in dtype and shape: the converter keys them `Identity:0`, `Identity_1:0`."""
    keras.utils.set_random_seed(0)
    inp = keras.Input((10,), name="features")
    hidden = keras.layers.Dense(8)(inp)
    model = keras.Model(inp, [keras.layers.Dense(2)(hidden), keras.layers.Dense(2)(hidden) * 3.0])
    return model, {"features": np.random.default_rng(0).random((16, 10), dtype=np.float32)}


@pytest.fixture(scope="module")
def alike_tfjs(tmp_path_factory):
    """One conversion of `_alike_outputs`, its SavedModel kept: the converter's output order is what varies."""
    model, x = _alike_outputs()
    out = tmp_path_factory.mktemp("alike")
    report = zoo.deploy.export.export(model, out, formats=["saved_model", "tfjs"], data=ExportData(test=x),
                                      latency_runs=0, isolate=False)
    assert report.ok, report.table()
    saved_model = next(p.parent for p in (out / "saved_model").rglob("saved_model.pb"))
    return model, x, report, out / "tfjs_float32", saved_model


def test_tfjs_outputs_map_to_keras_outputs_whatever_order_the_converter_wrote(alike_tfjs, tmp_path):
    """The TF.js outputs came back swapped in about one export in five ("max abs diff 1.8"): `align_output_names`
    did nothing where model.json keys outputs by tensor name. Both orders the converter can write are replayed on
    one conversion, each run in Node against Keras."""
    from zoo.deploy.formats.tfjs import TFJSRunner, align_output_names

    model, x, report, converted, saved_model = alike_tfjs
    expected = dict(zip(report.model["outputs"], (np.asarray(v) for v in model(x["features"]))))
    original = json.loads((converted / "model.json").read_text())
    by_tensor = original["signature"]["outputs"]
    keys = original["userDefinedMetadata"]["structuredOutputKeys"]
    assert sorted(keys) == sorted(expected)
    tensor_of = {k: v["name"] for k, v in by_tensor.items()}
    for order in (sorted(tensor_of.values()), sorted(tensor_of.values(), reverse=True)):
        folder = tmp_path / "_".join(n.split(":")[0] for n in order)
        shutil.copytree(converted, folder)
        written = json.loads(json.dumps(original))
        written["signature"]["outputs"] = {t: {**next(v for v in by_tensor.values() if v["name"] == t)}
                                           for t in order}  # keyed by tensor name, in this order
        (folder / "model.json").write_text(json.dumps(written))
        align_output_names(folder, saved_model)
        got = TFJSRunner(folder).predict(x)
        for name, ref in expected.items():
            assert float(np.max(np.abs(got[name] - ref))) <= FLOAT32, (order, name)


@pytest.mark.slow
@pytest.mark.parametrize("repeat", range(20))
def test_tfjs_multi_output_export_repeated(repeat, tmp_path):
    """The same two-alike-outputs export 20 times, each converted afresh: a one-in-five swap would show."""
    model, x = _alike_outputs()
    report = zoo.deploy.export.export(model, tmp_path, formats=["tfjs"], data=ExportData(test=x), latency_runs=0)
    (result,) = report.results
    assert result.status == "passed", report.table()
    _check_in_runtime(result, dict(zip(report.model["outputs"], (np.asarray(v) for v in model(x["features"])))), x)


# ----------------------------------------------------------------------------- the full grid


@pytest.mark.slow
@pytest.mark.parametrize("name", [c.name for c in cases.CASES])
def test_every_case_in_every_format(name, tmp_path):
    """Every case in every format, `model.export` beside it: zoo passes every cell Keras passes, and where zoo
    refuses, its message's first line says something, and names an op and a Keras layer (or the output it lost)
    with a way out."""
    case = cases.BY_NAME[name]
    row = cases.run_case(case)
    for fmt, cell in row["zoo"].items():
        keras_passed = row["keras"].get(fmt, {}).get("status") == "passed"
        if keras_passed or case.kind == "text":  # the lookup-table case: zoo carries its front-end as data
            assert cell["status"] == "passed", (fmt, cell)
        if cell["status"] != "passed":
            message = cell["message"] or ""
            assert message.splitlines()[0].strip(), (fmt, message)
            assert "Check 'false'" not in message and not message.startswith("AssertionError"), (fmt, message)
            assert "Serve the SavedModel" in message or "SavedModel" in message, (fmt, message)
