"""The paired ratios' estimate and its interval (core/harness/ratios.py): what the timer's
noise leaves possible for a measured speedup, and what decides whether a workload is timed on.

A host-bound call (a host sync and a Python loop of launches per call) reads 10-15% apart
from one alternation to the next on the H200, as the host's CPU changes speed; its estimate
must come with an interval that says so, and that narrows as alternations accrue, so that
timing can go on until the ratio is known to the profile's bound."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from core.evaluation.job import MAX_ROUNDS, Timing
from core.evaluation.scoring import workload_interval
from core.harness import timing
from core.harness.ratios import _signed_rank_depth, hodges_lehmann, ratio_interval


def test_up_to_six_alternations_the_interval_is_their_range():
    """Five ratios or fewer cannot give a 95% interval from their signs and ranks (the most
    extreme outcome already has chance 1/32); six give exactly the range."""
    for ratios in ([0.97, 1.04], [0.9, 1.0, 1.1], [1.02, 0.95, 1.01, 0.99, 1.07, 0.98]):
        assert ratio_interval(ratios) == pytest.approx((min(ratios), max(ratios)))


def test_the_cut_is_the_signed_rank_tables_critical_value():
    """Wilcoxon's signed-rank critical values, two-sided 5%, as published tables give them
    (n: T): the interval runs between the (T + 1)-th Walsh averages from either end."""
    for n, critical in ((6, 0), (7, 2), (8, 3), (10, 8), (12, 13), (15, 25), (20, 52), (25, 89)):
        assert _signed_rank_depth(n, 0.05) == critical + 1, n


def test_the_interval_narrows_with_alternations_where_the_range_widens():
    rng = random.Random(7)
    noisy = [math.exp(rng.gauss(0.0, 0.10)) for _ in range(32)]  # a host-bound call's rounds
    widths = {}
    for n in (8, 16, 32):
        low, high = ratio_interval(noisy[:n])
        widths[n] = high / low
        assert low <= hodges_lehmann(noisy[:n]) <= high
        assert high / low < max(noisy[:n]) / min(noisy[:n])
    assert widths[32] < widths[16] < widths[8]


def test_the_interval_holds_the_true_ratio_about_95_times_in_100():
    """Identical code on both sides (true ratio 1.0), each alternation's ratio off by the
    host's noise: the interval of 12 alternations holds 1.0 in about 95% of workloads. A
    narrower one would turn noise into rewards (docs/rl.md: a difference inside it is a tie)."""
    rng = random.Random(11)
    trials = 2000
    held = 0
    for _ in range(trials):
        ratios = [math.exp(rng.gauss(0.0, 0.12)) for _ in range(12)]
        low, high = ratio_interval(ratios)
        held += low <= 1.0 <= high
    assert 0.93 <= held / trials <= 0.98


def _walls(ratios: list[float]) -> dict:
    return {
        "baseline": [{"median_us": 100.0 * r} for r in ratios],
        "candidate": [{"median_us": 100.0} for _ in ratios],
    }


def _host_round(rng: random.Random, noise: float, calls: int = 16) -> list[float]:
    """One side's round in a mode of the host: a factor scattered by `noise`/sqrt(2) a side (so
    that the paired ratios scatter by `noise`), its calls 0.5% apart."""
    mode = 100.0 * math.exp(rng.gauss(0.0, noise / math.sqrt(2)))
    return [mode * (1 + rng.gauss(0.0, 0.005)) for _ in range(calls)]


def _rounds_until_settled(noise: float, seed: int) -> int:
    """How many alternations `train` times such a workload: timing.more_rounds with
    timing.settled and timing.wide, as the performance stage asks them."""
    train = Timing.for_device("cuda", "train")
    rng = random.Random(seed)
    pairs = [(_host_round(rng, noise), _host_round(rng, noise)) for _ in range(MAX_ROUNDS)]
    plan = (train.alternations, train.min_rounds or 1, train.extra_rounds, train.ci_target)
    for done in range(1, MAX_ROUNDS + 1):
        walls = {
            side: [{"median_us": statistics.median(p[i])} for p in pairs[:done]]
            for i, side in enumerate(("baseline", "candidate"))
        }
        sides = {
            side: [t for p in pairs[:done] for t in p[i]]
            for i, side in enumerate(("baseline", "candidate"))
        }
        more = timing.more_rounds(
            done,
            plan,
            lambda walls=walls, sides=sides: timing.settled(walls, sides, train.ci_target),
            lambda walls=walls: timing.wide(walls),
        )
        if not more:
            return done
    return MAX_ROUNDS


def test_a_noisy_workload_is_timed_on_until_its_interval_is_narrow_and_a_steady_one_is_not():
    steady = [_rounds_until_settled(0.01, seed) for seed in range(20)]
    assert max(steady) <= 4  # a small kernel's few percent: the planned rounds at most
    host_bound = sorted(_rounds_until_settled(0.06, seed) for seed in range(20))
    assert host_bound[10] > 8  # past the four extra rounds there were before
    assert host_bound[2] > 4  # four lucky alternations that agree do not stop it
    assert host_bound[-1] <= MAX_ROUNDS


def test_a_few_alternations_that_happen_to_agree_do_not_pass_for_a_known_ratio():
    """Four ratios of a host-bound call within 5% of each other (mla_prefill on the H200,
    one alternation in three 6% off): their range would call the ratio known to ±3%; the bound
    used for timing on does not."""
    lucky = [1.008, 0.962, 0.956, 0.973]
    low, high = ratio_interval(lucky)
    assert (high - low) / hodges_lehmann(lucky) < timing.WIDE_SPREAD
    assert timing.wide(_walls(lucky))
    assert not timing.wide(_walls([0.98, 1.02, 1.0, 0.99]))  # silu_mul's: known well enough


def test_a_results_interval_is_the_estimates_once_alternations_accrue():
    """The workload's interval (scoring.workload_interval): the medians' intervals' ratio
    widened to the estimate's interval, no longer to every alternation's ratio."""
    rng = random.Random(3)
    ratios = [math.exp(rng.gauss(0.0, 0.08)) for _ in range(24)]
    side = {"median_us": 100.0, "ci_low_us": 99.5, "ci_high_us": 100.5}
    candidate = {**side, "rounds": [{"median_us": 100.0} for _ in ratios]}
    baseline = {**side, "rounds": [{"median_us": 100.0 * r} for r in ratios]}
    low, high = workload_interval(candidate, baseline)
    assert (low, high) == pytest.approx(ratio_interval(ratios))
    assert min(ratios) < low and high < max(ratios)


def test_students_t_past_the_table_runs_on_from_it():
    """Published values at 40, 60 and 120 degrees of freedom: 2.021, 2.000, 1.980."""
    from core.harness.ratios import _t95

    for df, published in ((30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980)):
        assert _t95(df) == pytest.approx(published, abs=0.002)


def _sides(candidate_us: float, baseline_us: float, rounds: int = 3) -> tuple[dict, dict]:
    """Two sides of a workload whose every alternation read the same two medians."""

    def side(us: float) -> dict:
        return {
            "median_us": us,
            "ci_low_us": us * 0.999,
            "ci_high_us": us * 1.001,
            "rounds": [{"median_us": us}] * rounds,
        }

    return side(candidate_us), side(baseline_us)


def test_a_timer_offset_turns_an_evaluation_long_offset_on_a_tiny_kernel_into_a_tie():
    """The H200's identity runs found an additive offset between the two sides' processes that
    lasts a whole evaluation (docs/fidelity.md, "The timer offset"): a 5 µs graphed kernel read
    120 ns slower as the candidate in every alternation, which the alternations alone call a
    real 2.3% loss. Widened by the device's timer offset, the interval holds 1.0."""
    candidate, baseline = _sides(5.12, 5.00)
    low, high = workload_interval(candidate, baseline)
    assert high < 1.0, "every alternation agrees: from them alone it is no tie"
    low, high = workload_interval(candidate, baseline, timer_offset_us=0.21)
    assert low < 1.0 < high


def test_a_timer_offset_weighs_on_a_tiny_kernel_not_on_a_long_one():
    """An additive offset: the same 0.21 µs is 4% of a 5 µs kernel, 0.05% of a 400 µs one, so a
    real 2% gain on the long kernel stays a gain."""
    candidate, baseline = _sides(392.0, 400.0)
    low, high = workload_interval(candidate, baseline, timer_offset_us=0.21)
    assert 1.0 < low < high < 1.03
    tiny_low, tiny_high = workload_interval(*_sides(5.0, 5.0), timer_offset_us=0.21)
    assert tiny_high / tiny_low > 1.08 > high / low


def test_without_a_timer_offset_the_interval_is_its_alternations():
    candidate, baseline = _sides(5.12, 5.00)
    assert workload_interval(candidate, baseline, timer_offset_us=0.0) == workload_interval(
        candidate, baseline
    )
