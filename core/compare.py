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
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Iterable

DEFAULT_RESAMPLES = 4000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Outcome:
    """One scored result of a run, reduced to what a comparison needs."""

    task_id: str
    device: str  # the device model where known, else its id
    passed: bool
    speedup: float
    sol_fraction: float | None
    timing_kind: str


@dataclass(frozen=True)
class Arm:
    results: int
    correct: float  # share passed
    speedup: float  # effective, geometric mean
    sol_fraction: float | None  # median over passed


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

    def to_json(self) -> dict:
        return {
            "run_a": self.run_a, "run_b": self.run_b, "geomean_ratio": self.geomean_ratio,
            "interval": list(self.interval) if self.interval else None, "confidence": self.confidence,
            "resamples": self.resamples, "mixed_timing": self.mixed_timing,
            "only_a": [list(k) for k in self.only_a], "only_b": [list(k) for k in self.only_b],
            "tasks": [
                {"task": t.task_id, "device": t.device, "ratio": t.ratio,
                 "a": t.a.__dict__, "b": t.b.__dict__, "correct_diff": t.b.correct - t.a.correct}
                for t in self.tasks
            ],
        }


def arm(outcomes: list[Outcome]) -> Arm:
    effective = [o.speedup if o.passed and o.speedup > 0 else 1.0 for o in outcomes]
    sols = [o.sol_fraction for o in outcomes if o.passed and o.sol_fraction is not None]
    return Arm(
        results=len(outcomes),
        correct=sum(o.passed for o in outcomes) / len(outcomes),
        speedup=math.exp(statistics.fmean(math.log(s) for s in effective)),
        sol_fraction=statistics.median(sols) if sols else None,
    )


def compare(
    run_a: str, outcomes_a: Iterable[Outcome], run_b: str, outcomes_b: Iterable[Outcome],
    resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE, seed: int = 0,
) -> Comparison:
    groups_a, groups_b = _group(outcomes_a), _group(outcomes_b)
    keys = sorted(set(groups_a) & set(groups_b))
    tasks = [PairedTask(k[0], k[1], arm(groups_a[k]), arm(groups_b[k])) for k in keys]
    kinds = {o.timing_kind for g in (*groups_a.values(), *groups_b.values()) for o in g}
    geomean, interval = None, None
    if tasks:
        logs = [math.log(t.ratio) for t in tasks]
        geomean = math.exp(statistics.fmean(logs))
        interval = _bootstrap(logs, resamples, confidence, seed)
    return Comparison(
        run_a=run_a, run_b=run_b, tasks=tasks,
        only_a=sorted(set(groups_a) - set(groups_b)), only_b=sorted(set(groups_b) - set(groups_a)),
        geomean_ratio=geomean, interval=interval, confidence=confidence, resamples=resamples, mixed_timing=len(kinds) > 1,
    )


def _group(outcomes: Iterable[Outcome]) -> dict[tuple[str, str], list[Outcome]]:
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.task_id, o.device), []).append(o)
    return groups


def _bootstrap(logs: list[float], resamples: int, confidence: float, seed: int) -> tuple[float, float]:
    if len(logs) == 1:
        value = math.exp(logs[0])
        return value, value
    rng = random.Random(seed)
    n = len(logs)
    means = sorted(statistics.fmean(rng.choices(logs, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[int(tail * (resamples - 1))]
    high = means[int(math.ceil((1 - tail) * (resamples - 1)))]
    return math.exp(low), math.exp(high)
