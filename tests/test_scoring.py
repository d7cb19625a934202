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
)

H200_SPEC = Peaks(source="spec", bf16_tflops=989, fp32_tflops=67, hbm_tbps=4.8)


def test_speedup_is_baseline_over_candidate():
    assert speedup(100.0, 50.0) == 2.0
    assert speedup(100.0, 0.0) == 0.0


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
