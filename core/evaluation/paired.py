"""Two candidate files of one task, compared: `arena compare A.py B.py --task ID`.

Both are evaluated as one batch (core/evaluation/batch.py): the same seed, hence the same hidden
workloads and inputs, the same reference and the same baseline, on the same device. The
comparison pairs them workload by workload: B's speedup over A is the ratio of their speedups
over the shared baseline (B's / A's), which cancels what drifted in the device between the two
timings (predicted: the ratio of the two predicted times; the baseline's one prediction cancels).
Each ratio carries an interval from the two results' own noise (the interquartile spreads of the
measured times, or the model's bands of the two predictions, compounded), and so does their
geometric mean (its widest workload's). The verdict says B is faster only where
that interval clears 1, A likewise, and "no difference beyond the noise" otherwise; a candidate
that failed is compared on correctness alone. The cpu device's times are Triton interpreted:
never a ratio, so on `cpu` only correctness is compared.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from core.model.result import Result, WorkloadFigures

FASTER_B, FASTER_A, SAME = "B is faster", "A is faster", "no difference beyond the noise"


def interval_band(value: float, interval: list[float] | tuple[float, float] | None) -> float | None:
    """An interval [low, high] around `value` as a relative ± band (its wider side)."""
    if not interval or value <= 0:
        return None
    low, high = interval
    return max(high / value - 1, 1 - low / value, 0.0)


def speedup_band(w: WorkloadFigures, timing_kind: str) -> float | None:
    """The relative ± band of one workload's speedup: a prediction's own (`w.band`); for a
    measured one its interval (core/evaluation/scoring.py: the medians' intervals and the
    alternations' paired ratios); else (results from before intervals were kept, cpu) the two
    sides' half interquartile spreads compounded."""
    if timing_kind == "predicted":
        return w.band
    if w.interval:
        return interval_band(w.speedup, w.interval)
    sides = [w.candidate.get("spread"), w.baseline.get("spread")]
    if not all(isinstance(x, (int, float)) for x in sides):
        return None
    return (1 + sides[0] / 2) * (1 + sides[1] / 2) - 1  # type: ignore[operator]


def result_band(result: Result) -> float | None:
    """The relative ± band of a result's speedup: its interval where it carries one (the
    geometric means of its workloads' ends), else the widest workload's band (each lies within
    its own band, so the geometric mean lies within the widest). None where a workload has none."""
    if result.speedup_interval and result.timing_kind == "measured":
        return interval_band(result.speedup, result.speedup_interval)
    bands = [speedup_band(w, result.timing_kind) for w in result.workloads]
    if not bands or any(b is None for b in bands):
        return None
    return max(b for b in bands if b is not None)


@dataclass(frozen=True)
class PairedWorkload:
    label: str
    hidden: bool
    a_us: float | None  # each candidate's median time
    b_us: float | None
    ratio: float  # B's speedup over A: B's speedup / A's (both over the same baseline)
    band: float | None  # ± relative: both results' bands compounded

    @property
    def interval(self) -> tuple[float, float] | None:
        return (
            None
            if self.band is None
            else (self.ratio / (1 + self.band), self.ratio * (1 + self.band))
        )


@dataclass(frozen=True)
class FileComparison:
    task_id: str
    device: str
    timing_kind: str
    seed: int
    a: Result
    b: Result
    workloads: list[PairedWorkload] = field(default_factory=list)
    ratio: float | None = None  # geometric mean of the workloads' ratios
    band: float | None = None
    verdict: str = SAME
    why: str = ""

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.ratio is None or self.band is None:
            return None
        return (self.ratio / (1 + self.band), self.ratio * (1 + self.band))

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "device": self.device,
            "timing_kind": self.timing_kind,
            "seed": self.seed,
            "ratio": self.ratio,
            "band": self.band,
            "interval": list(self.interval) if self.interval else None,
            "verdict": self.verdict,
            "why": self.why,
            "workloads": [
                {**asdict(w), "interval": list(w.interval) if w.interval else None}
                for w in self.workloads
            ],
            "a": self.a.to_json(),
            "b": self.b.to_json(),
        }


def compare_results(a: Result, b: Result, seed: int) -> FileComparison:
    """A and B, evaluated with the same seed on the same device, paired per workload."""
    base: dict[str, Any] = {
        "task_id": a.task_id,
        "device": str(a.device.get("model") or a.device.get("id")),
        "timing_kind": a.timing_kind,
        "seed": seed,
        "a": a,
        "b": b,
    }
    if not (a.passed and b.passed):
        failed = [
            f"{n} {r.status} at {r.failed_stage}" for n, r in (("A", a), ("B", b)) if not r.passed
        ]
        verdict = (
            "neither is correct"
            if not (a.passed or b.passed)
            else ("only B is correct" if b.passed else "only A is correct")
        )
        return FileComparison(**base, verdict=verdict, why="; ".join(failed))
    if a.timing_kind == "cpu":
        return FileComparison(
            **base,
            verdict="both are correct",
            why="cpu times are Triton interpreted: not a performance figure, so no speed verdict",
        )
    theirs = {(w.label, w.hidden): w for w in b.workloads}
    paired: list[PairedWorkload] = []
    for wa in a.workloads:
        wb = theirs.get((wa.label, wa.hidden))
        if wb is None or wa.speedup <= 0 or wb.speedup <= 0:
            continue
        a_us, b_us = wa.candidate.get("median_us"), wb.candidate.get("median_us")
        if a.timing_kind == "predicted":
            # One model predicts the shared baseline once: it cancels; the candidates' bands stay.
            ratio = a_us / b_us if a_us and b_us else wb.speedup / wa.speedup
            sides = [wa.candidate.get("band"), wb.candidate.get("band")]
        else:
            # Each candidate was timed against the baseline in turn: the ratio of the speedups
            # cancels what drifted on the device between the two; all four spreads count.
            ratio = wb.speedup / wa.speedup
            sides = [speedup_band(wa, a.timing_kind), speedup_band(wb, b.timing_kind)]
        known = [x for x in sides if isinstance(x, (int, float))]
        band = (1 + known[0]) * (1 + known[1]) - 1 if len(known) == 2 else None
        paired.append(PairedWorkload(wa.label, wa.hidden, a_us, b_us, ratio, band))
    if not paired:
        return FileComparison(**base, verdict=SAME, why="no workload was timed for both")
    ratio = math.exp(sum(math.log(p.ratio) for p in paired) / len(paired))
    bands = [p.band for p in paired]
    band = None if any(x is None for x in bands) else max(x for x in bands if x is not None)
    if band is None:
        verdict, why = SAME, "a workload has no spread to judge the difference by"
    elif ratio / (1 + band) > 1:
        verdict, why = FASTER_B, f"the whole interval is above 1 (± {band * 100:.1f}%)"
    elif ratio * (1 + band) < 1:
        verdict, why = FASTER_A, f"the whole interval is below 1 (± {band * 100:.1f}%)"
    elif a.timing_kind == "predicted" and len({p.ratio > 1 for p in paired}) == 1:
        # Within the model's bands, but every workload says the same: the simulator orders 85% of
        # a kernel's variants at one shape right (docs/simulation.md), which is worth saying.
        who = "B" if ratio > 1 else "A"
        verdict = f"{who} looks faster, within the simulator's band"
        why = (
            f"every workload predicts {who} faster, but the interval (± {band * 100:.0f}%) holds 1: "
            "the simulator orders 85% of a kernel's variants right; measure on a GPU to be sure"
        )
    else:
        verdict, why = SAME, f"the interval (± {band * 100:.1f}%) holds 1"
    return FileComparison(
        **base, workloads=paired, ratio=ratio, band=band, verdict=verdict, why=why
    )
