"""`python scripts/benchmark.py cost-curves`: the fits that say where each curve bends, on made-up points."""

import pytest

from benchmarks.cost_curves import fit_affine, saturation_point


def points(throughputs, clients=(1, 2, 4, 8, 16, 32, 64)):
    return [{"clients": c, "throughput_rps": t} for c, t in zip(clients, throughputs)]


def test_saturation_is_where_no_larger_count_gains_ten_percent():
    # Amdahl-like: doubles until 8 clients, then flat within 5%.
    assert saturation_point(points([100, 200, 400, 800, 820, 810, 830])) == 8


def test_one_noisy_dip_does_not_end_the_curve_early():
    # 2 clients slower than 1, yet throughput goes on growing to 32 (a run measured on 2 cores).
    assert saturation_point(points([769, 744, 918, 940, 1400, 2100, 2000])) == 32


def test_a_curve_that_never_saturates_bends_at_its_last_point():
    assert saturation_point(points([100, 200, 400])) == 4


def test_affine_fit_recovers_the_fixed_cost_and_the_rate():
    # t(b) = 5 ms + b / 6000 samples/s, in ms: the bend b* = t0 * R = 30.
    sizes = [8, 16, 32, 64, 128, 256]
    a, c = fit_affine(sizes, [5 + b / 6.0 for b in sizes])
    assert a == pytest.approx(5)
    assert 1 / c == pytest.approx(6.0)
