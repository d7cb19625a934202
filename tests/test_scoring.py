"""Scoring: speedup, geometric means where failures count as zero, speed of light, points."""

from __future__ import annotations

import pytest

from core.devices.device import Peaks
from core.evaluation.scoring import (
    fast_p,
    geomean,
    impossibility_floor_us,
    points,
    roofline_us,
    sol_fraction,
    speedup,
    workload_speedup,
)

H200_SPEC = Peaks(source="spec", bf16_tflops=989, fp32_tflops=67, hbm_tbps=4.8)


def test_speedup_is_baseline_over_candidate():
    assert speedup(100.0, 50.0) == 2.0
    assert speedup(100.0, 0.0) == 0.0


def _side(median_us: float, rounds: list[float]) -> dict:
    return {"median_us": median_us, "rounds": [{"median_us": r} for r in rounds]}


def test_a_measured_speedup_comes_from_the_alternations_so_a_host_drift_cancels():
    """The same code on both sides while the host swings between a fast and a slow mode (a
    host-bound baseline's rounds read 300 or 800 µs on the H200): each alternation's two
    rounds agree, the pooled medians need not (here the candidate's calls fell in slow rounds
    more often)."""
    baseline = _side(300.0, [300, 800, 310, 790, 305])
    candidate = _side(790.0, [302, 795, 312, 800, 300])
    assert speedup(300.0, 790.0) < 0.4
    assert workload_speedup("measured", candidate, baseline) == pytest.approx(1.0, abs=0.01)


def test_one_alternation_caught_in_a_slow_mode_moves_the_speedup_little():
    baseline = _side(100.0, [100, 100, 100, 100, 100])
    candidate = _side(100.0, [100, 99, 101, 100, 166])  # the last ratio 0.6
    assert workload_speedup("measured", candidate, baseline) == pytest.approx(1.0, abs=0.02)


def test_without_two_alternations_or_measured_times_the_speedup_is_the_medians_ratio():
    one = workload_speedup("measured", _side(50.0, [50]), _side(100.0, [100]))
    assert one == 2.0
    assert workload_speedup("measured", {"median_us": 50.0}, {"median_us": 100.0}) == 2.0
    drifted = (_side(50.0, [50, 80]), _side(100.0, [100, 80]))
    assert workload_speedup("predicted", *drifted) == 2.0
    assert workload_speedup("cpu", *drifted) == 2.0


def test_geomean_counts_failures_as_zero_never_drops_them():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([2.0, 0.0, 8.0]) == 0.0
    assert geomean([]) == 0.0


def test_roofline_takes_the_slower_of_compute_and_memory():
    # 4096^3 bf16 GEMM: 137 GFLOP -> 139 us of compute; 100 MB -> 21 us of memory.
    m = n = k = 4096
    roof = roofline_us(2 * m * n * k, 2 * (m * k + n * k + m * n), H200_SPEC, "bf16")
    assert roof == pytest.approx(2 * m * n * k / 989e12 * 1e6)
    # A memory-bound rmsnorm: bytes dominate.
    assert roofline_us(4 * 4096 * 4096, 4 * 4096 * 4096, H200_SPEC, "fp32") == pytest.approx(
        4 * 4096 * 4096 / 4.8e12 * 1e6
    )
    assert sol_fraction(50.0, 100.0) == 0.5


def test_impossibility_floor_is_ninety_percent_of_spec_roofline():
    floor = impossibility_floor_us(1e12, 0, H200_SPEC, "bf16")
    assert floor == pytest.approx(0.9 * 1e12 / 989e12 * 1e6)
    assert impossibility_floor_us(1e12, 0, None, "bf16") is None


def test_classic_points_and_fast_p():
    assert points(compiled=True, correct=True, task_speedup=1.5) == 270
    assert points(compiled=True, correct=False, task_speedup=0.0) == 20
    assert points(compiled=False, correct=False, task_speedup=0.0) == 0
    results = [(True, 1.5), (True, 0.9), (False, 3.0), (True, 1.1)]
    assert fast_p(results, 1.0) == 0.5
    assert fast_p(results, 0.0) == 0.75
