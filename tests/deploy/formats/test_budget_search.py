"""The guarded-int8 search (`zoo.deploy.formats.ptq.budget`) on stand-in artifacts, and its statistics against
textbook values: no converter, milliseconds."""

import pytest

from zoo.deploy.formats.ptq import budget


def test_tied_sensitivities_are_ordered_by_how_far_each_layer_moves_the_outputs():
    """No single layer flips a decision (all drops 0), as on EfficientNetB0; the search must still start with the
    layer that moves the outputs most, here the only one whose float copy restores agreement."""
    moved = {"a": 0.001, "b": 0.009, "c": 0.003}

    def quantize(exclude=(), only=None):
        return f"only:{only}" if only is not None else "float:" + ",".join(exclude)

    def evaluate(path):
        if path.startswith("only:"):
            return 1.0
        return 1.0 if "b" in path.split(":")[1].split(",") else 0.97

    def tiebreak(path):
        return moved[path.split(":")[1]]

    result = budget.search(["a", "b", "c"], quantize, evaluate, 1.0, 1.0, tiebreak=tiebreak, metric="agreement")
    assert result.float_layers == ("b",) and result.within_budget
    assert [s.float_layers for s in result.steps] == [(), ("b",)]
    model_order = budget.search(["a", "b", "c"], quantize, evaluate, 1.0, 1.0)  # without it: model order
    assert model_order.float_layers == ("a", "b")


def test_wilson_interval_and_the_inputs_an_agreement_minimum_needs():
    # 0 of 10 (Wilson 1927; Brown, Cai and DasGupta 2001, Table 1 style): [0, 0.2775]; 10 of 10 mirrors it.
    assert budget.wilson_interval(0.0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert budget.wilson_interval(1.0, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    # p = 0.5, n = 100: 0.5 -+ 1.96 * sqrt(0.25 / 100 + 1.96^2 / 40000) / (1 + 1.96^2 / 100) = [0.4038, 0.5962]
    assert budget.wilson_interval(0.5, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    # n / (n + 1.96^2) >= 0.99  <=>  n >= 380.3
    assert budget.inputs_needed(0.99) == 381
    assert budget.wilson_interval(1.0, 381)[0] >= 0.99 > budget.wilson_interval(1.0, 380)[0]
