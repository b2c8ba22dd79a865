"""The verification's float bounds against float32's and float16's own rounding (numpy's casts, not zoo's)."""

import numpy as np

from zoo.deploy.export.verify import compare


def test_float_bounds_scale_with_outputs_beyond_one_as_float_rounding_does():
    # A regressor's prices: float32 rounding alone moves values of 2e5 by up to 2^-24 * 2^18 = 0.0156.
    prices = np.array([[201_234.56], [150_000.1], [3.5]], np.float64)
    keras_out = {"price": prices}
    rounded = {"price": prices.astype(np.float32).astype(np.float64) + 0.0156}
    assert compare(rounded, keras_out, "float32").passed
    assert not compare({"price": prices + 30.0}, keras_out, "float32").passed  # 30 > 1e-4 * 2e5

    # Class scores in [0, 1] keep the absolute bound: 2e-4 off fails.
    scores = {"p": np.array([[0.2, 0.8]])}
    assert not compare({"p": scores["p"] + 2e-4}, scores, "float32").passed


def test_float16_outputs_past_its_range_say_why():
    keras_out = {"y": np.array([[2e5]])}
    saturated = {"y": np.array([[float(np.finfo(np.float16).max)]])}  # what a float16 tensor holds at most
    (problem,) = compare(saturated, keras_out, "float16").problems
    assert "beyond float16's largest value" in problem
    # A value within float16's range (6e4, a multiple of its spacing of 32 there) passes.
    assert compare({"y": np.array([[6e4]], np.float16).astype(np.float64)}, {"y": np.array([[6e4]])}, "float16").passed


def test_a_missed_int8_criterion_names_the_remedies_unless_one_was_taken():
    from types import SimpleNamespace

    from zoo.deploy.export.verify import int8_remedy

    keras_out = {"p": np.eye(10)[np.arange(100) % 10]}
    flipped = {"p": keras_out["p"].copy()}
    flipped["p"][:2] = np.roll(flipped["p"][:2], 1, axis=-1)  # 2 of 100 decisions change: 98%
    missed = compare(flipped, keras_out, "int8")

    def job(qat=False, variant="int8", format="onnx", **options):
        options = {"min_agreement": None, "max_accuracy_drop": None, **options}  # resolved, as the planner gives them
        target = SimpleNamespace(variant=variant, precision="int8", options=options, format=format)
        return SimpleNamespace(target=target,
                               model=SimpleNamespace(quantization_aware=qat))

    remedy = int8_remedy(missed, job())
    # Full agreement on n inputs has a 95% Wilson lower bound of n / (n + 1.96^2): 99% needs n >= 380.3.
    assert "(--min-agreement 99)" in remedy and "381 inputs" in remedy and "--qat-from" in remedy
    assert "a16w8" not in remedy and "--precision a16w8" in int8_remedy(missed, job(format="tflite"))
    assert "int16 activations (then float)" in int8_remedy(missed, job(format="tflite", variant="a8w8"))
    assert int8_remedy(missed, job(min_agreement=99.0)) is None  # the guard was asked for already
    assert int8_remedy(missed, job(qat=True)) is None  # the ranges were learned
    assert int8_remedy(missed, job(variant="uint8")) is None  # a TF.js file's uint8 weights: no guards there
    assert int8_remedy(compare(keras_out, keras_out, "int8"), job()) is None


def test_a_costly_model_is_verified_on_as_many_inputs_as_its_check_needs():
    from zoo.deploy.export.verify import MIN_SAMPLES, sample_budget

    cheap = sample_budget(10_000, 50, 1e-4, {"float32"})  # 1e-4 s per input: 20 s buy 200,000 inputs
    assert (cheap.samples, cheap.latency_runs, cheap.reason) == (10_000, 50, None)
    costly = sample_budget(64, 50, 2.0, {"float32"})  # convnext_xlarge-like: 2 s an input
    assert costly.samples == MIN_SAMPLES["float32"] == 32 and costly.latency_runs == 5
    assert costly.reason.startswith("32 of 64 test inputs and 5 of 50 latency runs: Keras takes 2000 ms per input")
    with_int8 = sample_budget(1000, 50, 2.0, {"float32", "int8"})  # 99% agreement resolves 1 in 100 from 100 inputs
    assert with_int8.samples == 100 and "int8 agreement" in with_int8.reason
    assert sample_budget(20, 50, 2.0, {"int8"}).samples == 20  # never more than given


def test_the_export_reports_how_many_inputs_it_verified_on(tmp_path, monkeypatch):
    import keras

    import zoo.deploy.export
    from zoo.deploy.export import ExportData, verify

    monkeypatch.setattr(verify, "VERIFY_BUDGET_S", 1e-6)  # every model is costly now
    keras.utils.set_random_seed(0)
    inp = keras.Input((4,), name="x")
    model = keras.Model(inp, keras.layers.Dense(3, name="y")(inp))
    x = np.random.default_rng(0).random((200, 4), dtype=np.float32)
    report = zoo.deploy.export.export(model, tmp_path, ["saved_model"], data=ExportData(test=x), latency_runs=20,
                                      isolate=False)
    (result,) = report.results
    assert result.status == "passed", result.error
    assert result.verification.eval_samples == report.data["eval_samples"] == 32
    assert "32 of 200 test inputs" in report.data["eval"] and "32 of 200 test inputs" in (tmp_path / "report.md").read_text()
    # a count the caller gave is kept
    given = zoo.deploy.export.export(model, tmp_path / "given", ["saved_model"], latency_runs=0, isolate=False,
                                     data=ExportData(test=x, max_test_samples=150))
    assert given.results[0].verification.eval_samples == 150
