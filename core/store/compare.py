"""A/B comparison of two runs: paired per-task differences in correctness, speedup and fraction
of speed of light, with a bootstrap confidence interval on the geometric-mean speedup ratio.

Pairing is by task and device model: the two runs differ in what is being compared (an
agent, a model, a variant such as a cheatsheet), so agent and variant are not part of the key.
Several results per key (iterations, several agents in one run) are pooled:

- correctness: the share of results that passed;
- effective speedup: the geometric mean over the results of the speedup a user would get —
  the candidate's where it passed, 1.0 where it did not (the baseline stays in use). This keeps
  a failed attempt from counting as infinitely slow, and an arm that never passes scores 1.0;
- fraction of speed of light: the median over passed results.

The headline is the geometric mean over paired tasks of effective speedup B / effective
speedup A, with a percentile bootstrap interval over tasks (tasks resampled with replacement;
a fixed seed, so the same two runs always print the same interval).

A verdict is given only where the evidence supports one; otherwise it is "not enough
evidence" with the reason, and no interval is printed where it would mean nothing:
- fewer than MIN_PAIRED_TASKS paired tasks: a bootstrap over 1-4 values is no interval;
- every paired task with the same ratio: the bootstrap has no spread (a zero-width interval);
- predicted timings (`sim:` devices) whose difference stays inside the model's band: the
  simulator cannot tell them apart. B is called faster only where the interval clears 1 by
  more than the band (and A likewise);
- cpu timings only (Triton's interpreter): not a performance figure at all.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from core.evaluation.scoring import effective_speedup

DEFAULT_RESAMPLES = 4000
DEFAULT_CONFIDENCE = 0.95
MIN_PAIRED_TASKS = 5  # fewer: "not enough evidence"
NOT_ENOUGH = "not enough evidence"


@dataclass(frozen=True)
class Outcome:
    """One scored result of a run, reduced to what a comparison needs."""

    task_id: str
    device: str  # the device model where known, else its id
    passed: bool
    speedup: float
    sol_fraction: float | None
    timing_kind: str
    band: float | None = (
        None  # predicted results: the model's ± relative band on the speedup (the widest workload's)
    )


@dataclass(frozen=True)
class Arm:
    results: int
    correct: float  # share passed
    speedup: float  # effective, geometric mean
    sol_fraction: float | None  # median over passed
    band: float | None = None  # the widest predicted band among its results


@dataclass(frozen=True)
class PairedTask:
    task_id: str
    device: str
    a: Arm
    b: Arm

    @property
    def ratio(self) -> float:
        return self.b.speedup / self.a.speedup


@dataclass(frozen=True)
class Comparison:
    run_a: str
    run_b: str
    tasks: list[PairedTask]
    only_a: list[tuple[str, str]]  # (task, device) present in A only
    only_b: list[tuple[str, str]]
    geomean_ratio: float | None
    interval: tuple[float, float] | None
    confidence: float
    resamples: int
    mixed_timing: bool  # the runs' timing kinds differ (measured vs predicted vs cpu)
    verdict: str = NOT_ENOUGH  # B faster | A faster | no clear difference | not enough evidence
    why: str | None = None  # what the verdict rests on, or why there is none
    band: float | None = None  # predicted: the model's band a difference must clear

    def to_json(self) -> dict:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "geomean_ratio": self.geomean_ratio,
            "interval": list(self.interval) if self.interval else None,
            "confidence": self.confidence,
            "verdict": self.verdict,
            "why": self.why,
            "band": self.band,
            "resamples": self.resamples,
            "mixed_timing": self.mixed_timing,
            "only_a": [list(k) for k in self.only_a],
            "only_b": [list(k) for k in self.only_b],
            "tasks": [
                {
                    "task": t.task_id,
                    "device": t.device,
                    "ratio": t.ratio,
                    "a": t.a.__dict__,
                    "b": t.b.__dict__,
                    "correct_diff": t.b.correct - t.a.correct,
                }
                for t in self.tasks
            ],
        }


def arm(outcomes: list[Outcome]) -> Arm:
    effective = [effective_speedup(o.passed, o.speedup) for o in outcomes]
    sols = [o.sol_fraction for o in outcomes if o.passed and o.sol_fraction is not None]
    bands = [o.band for o in outcomes if o.band is not None]
    return Arm(
        results=len(outcomes),
        correct=sum(o.passed for o in outcomes) / len(outcomes),
        speedup=math.exp(statistics.fmean(math.log(s) for s in effective)),
        sol_fraction=statistics.median(sols) if sols else None,
        band=max(bands) if bands else None,
    )


def compare(
    run_a: str,
    outcomes_a: Iterable[Outcome],
    run_b: str,
    outcomes_b: Iterable[Outcome],
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> Comparison:
    groups_a, groups_b = _group(outcomes_a), _group(outcomes_b)
    keys = sorted(set(groups_a) & set(groups_b))
    tasks = [PairedTask(k[0], k[1], arm(groups_a[k]), arm(groups_b[k])) for k in keys]
    kinds = {o.timing_kind for g in (*groups_a.values(), *groups_b.values()) for o in g}
    geomean, interval = None, None
    band = _band(tasks)
    logs = [math.log(t.ratio) for t in tasks]
    if tasks:
        geomean = math.exp(statistics.fmean(logs))
    if len(tasks) < MIN_PAIRED_TASKS:
        verdict, why = (
            NOT_ENOUGH,
            f"{len(tasks)} paired task{'' if len(tasks) == 1 else 's'}; a verdict needs at least {MIN_PAIRED_TASKS}",
        )
    elif max(logs) - min(logs) < 1e-12:
        verdict, why = (
            NOT_ENOUGH,
            f"every paired task has the same ratio ({geomean:.2f}×): the bootstrap has no spread to give an interval",
        )
    else:
        interval = _bootstrap(logs, resamples, confidence, seed)
        verdict, why = _verdict(geomean, interval, band, confidence)  # type: ignore[arg-type]
    if (
        kinds == {"cpu"}
    ):  # Triton's interpreter against PyTorch on the CPU: no ratio of the two says anything about a kernel
        verdict, why, interval = (
            NOT_ENOUGH,
            "cpu timings are interpreted: not a performance figure",
            None,
        )
    if len(kinds) > 1:
        verdict, why = (
            NOT_ENOUGH,
            "the runs mix timing kinds (measured, predicted, cpu): their speedups are not comparable",
        )
    return Comparison(
        run_a=run_a,
        run_b=run_b,
        tasks=tasks,
        only_a=sorted(set(groups_a) - set(groups_b)),
        only_b=sorted(set(groups_b) - set(groups_a)),
        geomean_ratio=geomean,
        interval=interval,
        confidence=confidence,
        resamples=resamples,
        mixed_timing=len(kinds) > 1,
        verdict=verdict,
        why=why,
        band=band,
    )


def _band(tasks: list[PairedTask]) -> float | None:
    """The predicted band a difference must clear: the median over paired tasks of the wider
    of the two arms' bands (None for measured results)."""
    bands = [
        max(b for b in (t.a.band, t.b.band) if b is not None)
        for t in tasks
        if t.a.band is not None or t.b.band is not None
    ]
    return statistics.median(bands) if bands else None


def _verdict(
    geomean: float, interval: tuple[float, float], band: float | None, confidence: float
) -> tuple[str, str]:
    low, high = interval
    if band is not None:
        if 1 / (1 + band) <= geomean <= 1 + band:
            return (
                NOT_ENOUGH,
                f"the difference ({geomean:.2f}×) is inside the simulator's ±{band * 100:.0f}% band on predicted timings",
            )
        if low > 1 + band:
            return (
                "B faster",
                f"the {confidence:.0%} interval clears 1 by more than the simulator's ±{band * 100:.0f}% band",
            )
        if high < 1 / (1 + band):
            return (
                "A faster",
                f"the {confidence:.0%} interval clears 1 by more than the simulator's ±{band * 100:.0f}% band",
            )
        return (
            NOT_ENOUGH,
            f"the {confidence:.0%} interval reaches into the simulator's ±{band * 100:.0f}% band on predicted timings",
        )
    if low > 1:
        return "B faster", f"the {confidence:.0%} interval lies above 1"
    if high < 1:
        return "A faster", f"the {confidence:.0%} interval lies below 1"
    return "no clear difference", f"the {confidence:.0%} interval contains 1"


def _group(outcomes: Iterable[Outcome]) -> dict[tuple[str, str], list[Outcome]]:
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.task_id, o.device), []).append(o)
    return groups


def _bootstrap(
    logs: list[float], resamples: int, confidence: float, seed: int
) -> tuple[float, float]:
    rng = random.Random(seed)
    n = len(logs)
    means = sorted(statistics.fmean(rng.choices(logs, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[int(tail * (resamples - 1))]
    high = means[int(math.ceil((1 - tail) * (resamples - 1)))]
    return math.exp(low), math.exp(high)
