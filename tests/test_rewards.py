"""Rewards (core/rl/rewards.py): the default's values by outcome, the registry, and the two rules
every built-in keeps: an integrity violation is the lowest reward of all, and review notes
change nothing."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from core.model.result import STAGES, Result, StageResult
from core.rl import rewards


def make(
    status: str = "passed",
    failed_stage: str | None = None,
    speedup: float = 1.0,
    sol: float | None = None,
    flags: tuple[str, ...] = (),
    notes: tuple[str, ...] = (),
    timing_kind: str = "measured",
) -> Result:
    """A Result as assemble() would make it: stages before the failed one passed, after it skipped."""
    stages = []
    for name in STAGES:
        if failed_stage is None:
            s = "passed" if status == "passed" else "skipped"
        elif STAGES.index(name) < STAGES.index(failed_stage):
            s = "passed"
        elif name == failed_stage:
            s = "error" if status == "infrastructure_error" else "failed"
        else:
            s = "skipped"
        stages.append(StageResult(name, status=s))
    return Result(
        task_id="elementwise/axpy",
        candidate_sha256="0" * 64,
        device={"id": "cuda:0"},
        timing_kind=timing_kind,
        status=status,
        failed_stage=failed_stage,
        stages=stages,
        workloads=[],
        speedup=speedup if status == "passed" else 0.0,
        sol_fraction=sol,
        sol_source="spec" if sol is not None else None,
        points=0.0,
        integrity_flags=list(flags),
        review_notes=list(notes),
    )


BUILTINS = ["default", "log_speedup", "sol", "gap_closed", "fast_p", "fast_1.5", "fast_0"]


def no_code() -> Result:
    """A reply that held no candidate, as the arena records it (core/rl/session.py)."""
    r = make("failed", "compile")
    r.stages[0].note = rewards.NO_CODE_NOTE
    return r


def test_default_values_by_outcome() -> None:
    r = rewards.get_reward("default")
    assert r(no_code()) == -0.75  # abstaining is the lowest honest outcome
    assert r(make("failed", "compile")) == -0.5
    assert r(make("failed", "correctness")) == -0.25
    assert r(make("failed", "generalization")) == -0.25  # hidden-shape failures are incorrect too
    assert r(make("failed", "performance")) == -0.25  # wrong or crashed while timed
    assert r(make("infrastructure_error", "compile")) is None  # retry, never learn from it
    assert r(make("failed", "performance", flags=("timer_exceeds_wall_clock: forged",))) == -1.0
    assert r(make(speedup=1.0)) == pytest.approx(0.525)
    assert r(make(speedup=8.0)) == 1.0 and r(make(speedup=1000.0)) == 1.0  # capped
    assert r(make(speedup=1 / 8)) == pytest.approx(0.05) and r(make(speedup=1e-6)) == pytest.approx(
        0.05
    )
    assert r(make(speedup=0.0)) == pytest.approx(0.05)  # correct but untimed


def test_default_rises_with_speedup_inside_the_cap() -> None:
    r = rewards.get_reward()
    values = [r(make(speedup=s)) for s in (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert all(0 < v <= 1 for v in values)


@pytest.mark.parametrize("name", BUILTINS)
def test_the_ladder_no_code_compile_wrong_slow_fast_never_descends(name: str) -> None:
    """So that abstaining never pays: each rung a policy climbs (write code, make it compile,
    make it right, make it fast) never lowers its reward, for every built-in."""
    fn = rewards.get_reward(name)
    ladder = [
        no_code(),
        make("failed", "compile"),
        make("failed", "correctness"),
        make(speedup=0.5, sol=0.05),
        make(speedup=2.0, sol=0.2),
    ]
    values = [fn(r) for r in ladder]
    assert all(v is not None for v in values)
    assert values == sorted(values), f"{name}: {values}"  # type: ignore[type-var]
    if not name.startswith("fast_"):  # fast_p is 0/1 by definition: flat below its threshold
        assert len(set(values)) == len(values), f"{name}: every rung is strictly above the last"


def test_every_builtin_reads_the_speedup_through_one_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one place where a speedup adjusted for measurement noise replaces the raw one."""
    fast, tied = make(speedup=3.0, sol=0.3), make(speedup=1.0, sol=0.1)
    speed_rewards = [n for n in BUILTINS if n != "sol"]  # sol reads the fraction, not the speedup
    before = {n: rewards.get_reward(n)(fast) for n in speed_rewards}
    monkeypatch.setattr(rewards, "reward_speedup", lambda result: 1.0)  # 3x counted as a tie
    after = {n: rewards.get_reward(n)(fast) for n in speed_rewards}
    assert after == {n: rewards.get_reward(n)(tied) for n in speed_rewards}
    assert all(after[n] < before[n] for n in ("default", "gap_closed", "fast_p", "fast_1.5"))


def test_gap_closed_survives_a_weak_baseline() -> None:
    """The share of the baseline-to-speed-of-light gap closed: 0 at the baseline, 1 at the
    limit, whatever the speedup; against a weak baseline a huge speedup is still at most 1."""
    from core.evaluation.scoring import gap_closed

    assert gap_closed(1.0, 0.1) == pytest.approx(0.0)
    assert gap_closed(10.0, 1.0) == pytest.approx(1.0)  # at the speed of light
    # baseline 100 us, limit 10 us, candidate 55 us: half the gap closed
    assert gap_closed(100 / 55, 10 / 55) == pytest.approx(0.5)
    # a weak baseline (1000 us) and a candidate at 20 us: 50x, but 98% of the gap, not more
    assert gap_closed(1000 / 20, 10 / 20) == pytest.approx(980 / 990)
    assert gap_closed(0.5, 0.05) < 0  # slower than the baseline
    assert gap_closed(2.0, None) is None and gap_closed(0.0, 0.1) is None
    assert gap_closed(0.5, 0.5) is None  # a baseline already at the limit: no gap to close
    r = rewards.get_reward("gap_closed")
    assert r(make(speedup=1.0, sol=0.1)) == pytest.approx(
        0.525
    )  # the baseline's speed, as the default
    assert r(make(speedup=10.0, sol=1.0)) == pytest.approx(1.0)
    assert r(make(speedup=2.0, sol=None)) == rewards.get_reward("default")(make(speedup=2.0))
    assert (
        r(make(speedup=1000 / 20, sol=10 / 20))
        < 1.0
        == rewards.get_reward("default")(make(speedup=1000 / 20))
    )


def test_fast_p_and_sol() -> None:
    fast = rewards.get_reward("fast_1.5")
    assert (
        fast(make(speedup=1.6)) == 1.0
        and fast(make(speedup=1.4)) == 0.0
        and fast(make("failed", "compile")) == 0.0
    )
    assert rewards.get_reward("fast_p")(make(speedup=1.01)) == 1.0
    sol = rewards.get_reward("sol")
    assert sol(make(sol=0.5)) == pytest.approx(0.05 + 0.95 * 0.5)
    assert sol(make(sol=None)) == pytest.approx(
        0.05
    )  # no speed of light (the CPU device): the floor
    assert sol(make("failed", "correctness")) == -0.25


def test_registry_names_and_callables() -> None:
    def half(result: Result) -> float:
        return 0.5

    assert rewards.get_reward(half) is half
    rewards.register_reward("test_half", half)
    assert rewards.get_reward("test_half") is half
    with pytest.raises(rewards.UnknownReward, match="unknown reward `nope`: use one of"):
        rewards.get_reward("nope")
    with pytest.raises(TypeError, match="give a callable"):
        rewards.register_reward("bad", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threshold"):
        rewards.fast_p(-1)


def _grid() -> list[Result]:
    """Every outcome the pipeline produces, crossed with speedups, speed-of-light fractions and
    timing kinds, with and without review notes."""
    results = []
    for speedup, sol, kind, notes in itertools.product(
        (0.0, 0.01, 0.9, 1.0, 3.0, 50.0),
        (None, 0.0, 0.3, 1.0),
        ("measured", "cpu"),
        ((), ("high_speedup: x",)),
    ):
        results.append(make(speedup=speedup, sol=sol, timing_kind=kind, notes=notes))
        for stage in STAGES:
            results.append(make("failed", stage, sol=sol, timing_kind=kind, notes=notes))
            results.append(make("infrastructure_error", stage, timing_kind=kind, notes=notes))
    return results


@pytest.mark.parametrize("name", BUILTINS)
def test_integrity_violation_is_lowest_for_every_builtin(name: str) -> None:
    fn = rewards.get_reward(name)
    clean = _grid()
    # The same results with a proven violation: whatever else happened (even "passed", even 50×).
    cheats = [
        dataclasses.replace(r, integrity_flags=["stream_escape: work outside the timed stream"])
        for r in clean
    ]
    cheats += [dataclasses.replace(r, status="failed", integrity_flags=["f"]) for r in clean]
    cheat_values = {fn(r) for r in cheats}
    assert None not in cheat_values, "a proven violation always gets a reward, never a retry"
    worst_cheat = max(cheat_values)  # type: ignore[type-var]
    honest = [v for v in (fn(r) for r in clean) if v is not None]
    assert honest and worst_cheat < min(honest), (
        f"{name}: an integrity violation must score below every honest outcome"
    )


@pytest.mark.parametrize("name", BUILTINS)
def test_review_notes_change_nothing(name: str) -> None:
    fn = rewards.get_reward(name)
    for r in _grid():
        noted = dataclasses.replace(
            r, review_notes=["high_speedup: 40× faster", "untimed_work: 900 µs outside the timer"]
        )
        bare = dataclasses.replace(r, review_notes=[])
        a, b = fn(noted), fn(bare)
        assert a == b or (a is not None and b is not None and math.isclose(a, b))


def test_outcome_order() -> None:
    assert rewards.outcome(no_code()) == "no_code"
    assert rewards.has_code("def run(x):\n    return x\n") and rewards.has_code("this is prose")
    assert not any(
        rewards.has_code(s) for s in ("", "  \n", "# only a comment\n", '"""a docstring"""\n')
    )
    assert (
        rewards.outcome(make("infrastructure_error", "performance", flags=("x",)))
        == "integrity_violation"
    )
    assert rewards.outcome(make("infrastructure_error", "compile")) == "infrastructure_error"
    assert rewards.outcome(make("failed", "compile")) == "compile_failed"
    assert rewards.outcome(make("failed", "generalization")) == "incorrect"
    assert rewards.outcome(make()) == "correct"


def test_a_difference_from_the_baseline_inside_the_results_noise_is_a_tie() -> None:
    """The baseline submitted as the candidate reads 0.99 or 1.01 as the timer's noise falls:
    both earn the reward of exactly 1.0 while their intervals hold 1.0; a clear gain does not."""
    default = rewards.get_reward("default")
    at_baseline = default(make(speedup=1.0))
    for speed, interval in ((0.99, [0.97, 1.01]), (1.01, [0.99, 1.03])):
        r = dataclasses.replace(make(speedup=speed), speedup_interval=interval)
        assert default(r) == at_baseline
    gain = dataclasses.replace(make(speedup=1.2), speedup_interval=[1.15, 1.25])
    assert default(gain) > at_baseline


def test_a_prediction_is_read_as_it_is_never_tied_inside_its_band() -> None:
    """A `sim:` prediction has no noise: its band is the model's error against the GPU. Two
    GEMM candidates predicted at 0.2x and 3x under gemm's wide band earn different rewards, one
    at a time and in a group, even from a result stored with the band as its interval."""
    default = rewards.get_reward("default")
    slow, fast = (
        dataclasses.replace(
            make(speedup=s, timing_kind="predicted"), speedup_interval=[s / 10.9, s * 10.9]
        )
        for s in (0.2, 3.0)
    )
    assert default(slow) < default(make(speedup=1.0)) < default(fast)
    grouped = rewards.group_rewards(default, [slow, fast])
    assert grouped == [default(slow), default(fast)]


def test_a_sim_result_carries_no_noise_interval_and_its_band_keeps_a_positive_low() -> None:
    """Ties read a measured result's interval only; a predicted workload's band brackets its
    speedup divided and multiplied by (1 + band), so a band over 100% never reads a low of 0.
    (That the verdict gives a sim result no interval: tests/test_sim_anchor.py.)"""
    from core.evaluation import scoring

    assert scoring.band_interval(0.5, 9.0) == (0.05, 5.0)
    assert scoring.noise_interval("predicted", [0.9, 1.1]) is None
    assert scoring.noise_interval("measured", [0.9, 1.1]) == [0.9, 1.1]


def test_a_groups_members_inside_each_others_noise_earn_one_reward() -> None:
    """One source submitted twice in a GRPO group, timed at 1.50 and 1.53 with overlapping
    intervals, earns one reward (their cluster's geometric mean); a member clearly faster, and
    a failed one, keep their own."""
    twice = [
        dataclasses.replace(make(speedup=1.50), speedup_interval=[1.46, 1.54]),
        dataclasses.replace(make(speedup=1.53), speedup_interval=[1.49, 1.57]),
        dataclasses.replace(make(speedup=2.40), speedup_interval=[2.35, 2.45]),
        make("failed", "correctness"),
    ]
    got = rewards.group_rewards(rewards.get_reward("default"), twice)
    assert got[0] == got[1]
    assert got[2] > got[0] > got[3]
    assert twice[0].speedup == 1.50  # the results keep what was measured
