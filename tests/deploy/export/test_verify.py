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

    def job(qat=False, variant="int8", **options):
        options = {"min_agreement": None, "max_accuracy_drop": None, **options}  # resolved, as the planner gives them
        return SimpleNamespace(target=SimpleNamespace(variant=variant, precision="int8", options=options),
                               model=SimpleNamespace(quantization_aware=qat))

    remedy = int8_remedy(missed, job())
    # Full agreement on n inputs has a 95% Wilson lower bound of n / (n + 1.96^2): 99% needs n >= 380.3.
    assert "(--min-agreement 99)" in remedy and "381 inputs" in remedy and "--qat-from" in remedy
    assert int8_remedy(missed, job(min_agreement=99.0)) is None  # the guard was asked for already
    assert int8_remedy(missed, job(qat=True)) is None  # the ranges were learned
    assert int8_remedy(missed, job(variant="uint8")) is None  # a TF.js file's uint8 weights: no guards there
    assert int8_remedy(compare(keras_out, keras_out, "int8"), job()) is None
