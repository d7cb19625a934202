"""What the leaderboard is made of: the timing kinds and groupings it knows, a scored result
(`Scored`), an attempt that left nothing to score (`Failure`), one ranked `Entry` and a `Board`.
core/store/leaderboard.py reads them from the store and ranks them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.evaluation import scoring
from core.model.statuses import TimingKind

TIMING_KINDS = tuple(
    k.value for k in TimingKind
)  # measured, predicted, cpu: the order of the boards
RANKED_KINDS = ("measured", "predicted")
GROUP_BY = ("model", "vendor")
DEFAULT_P = 1.0
LABELS = {
    "measured": "measured",
    "predicted": "predicted: simulated devices, never mixed with measured",
    "cpu": "cpu: for information, never ranked",
    # External tasks (core/tasks/external.py): their own commands and timer, scored by their own rules.
    "external": "external: each task's own correctness and timing, scored by its own rules (not this arena's protocol)",
}


class LeaderboardError(ValueError):
    """A board cannot be built as asked (an unknown timing kind, p <= 0); the message says what to pass."""


@dataclass(frozen=True)
class Scored:
    """One stored result with who produced it: the row a board is built from."""

    run_id: str
    job_id: int
    task_id: str
    family: str
    agent: str  # the job's agent, else the candidate file's name
    model: str | None  # the attempt's model, where an attempt produced the result
    device_id: str
    device_model: str | None
    device_vendor: str | None
    timing_kind: str
    status: str  # passed | failed | infrastructure_error
    speedup: float
    sol_fraction: float | None
    integrity_flags: tuple[str, ...] = ()
    starter: bool = False  # an agent submitted the unchanged starter on purpose
    baseline_impl: str | None = None  # which baseline implementation the speedup is against
    # The speedup's interval [low, high] (core/evaluation/scoring.py); None for results from
    # before intervals were kept, and for cpu times.
    speedup_interval: tuple[float, float] | None = None

    @property
    def violation(self) -> bool:
        return bool(self.integrity_flags)

    @property
    def correct(self) -> bool:
        return self.status == "passed" and not self.violation

    @property
    def effective_interval(self) -> tuple[float, float]:
        """The interval of `effective_speedup`: a correct result's own (the speedup itself where
        it has none); a failure's is exactly 1.0."""
        if not self.correct:
            return (scoring.FAILED_SPEEDUP, scoring.FAILED_SPEEDUP)
        return self.speedup_interval or (self.speedup, self.speedup)

    @property
    def gap_closed(self) -> float | None:
        """The share of the baseline-to-speed-of-light gap it closed where correct (a failure
        closes none: 0.0); None without a speed of light (core/evaluation/scoring.py)."""
        if not self.correct:
            return 0.0
        return scoring.gap_closed(self.speedup, self.sol_fraction)

    @property
    def effective_speedup(self) -> float:
        """What the user gets: the candidate's speedup where it is correct, else 1.0 (the baseline stays)."""
        return scoring.effective_speedup(self.correct, self.speedup)


@dataclass(frozen=True)
class Failure:
    """An attempt whose agent produced nothing to score (`agent_error`, `no_submission`): it
    has no result; a board counts it against its entry, never as a result."""

    run_id: str
    attempt_id: str
    task_id: str
    family: str
    agent: str
    model: str | None
    device_id: str
    device_model: str | None
    device_vendor: str | None
    timing_kind: str
    outcome: str  # agent_error | no_submission
    reason: str | None


@dataclass(frozen=True)
class Entry:
    rank: (
        int | None
    )  # 1-based within its (family, device) group; None on a cpu board (never ranked) and for an entry with no correct result
    agent: str
    model: str | None
    family: str
    device: (
        str  # the device model (its id where the model is unknown), or the vendor with by="vendor"
    )
    vendor: str | None
    speedup: float  # geometric mean of effective speedups (a failure counts 1.0)
    fast_p: float | None  # share correct and faster than p × baseline; None on a cpu board
    sol_fraction: float | None  # median over correct results
    correct: float  # share of results correct (passed, no integrity violation)
    results: int
    violations: int  # results with a proven integrity violation
    tasks: int  # distinct tasks among the results
    failed: int = 0  # results that failed (a stage failed, or an integrity violation)
    failures: int = 0  # attempts that produced nothing to score (agent_error + no_submission): not in any figure above
    agent_errors: int = 0
    no_submissions: int = 0
    starters: int = 0  # results that are the unchanged starter, submitted on purpose
    # The interval of `speedup`: the geometric means of its results' interval ends. Entries whose
    # intervals overlap share a rank: the difference is inside the timer's noise.
    speedup_low: float | None = None
    speedup_high: float | None = None

    @property
    def ranked(self) -> bool:
        """Ranked on its board: it has a correct result (and the board ranks)."""
        return self.rank is not None

    @property
    def unscored(self) -> int:
        """What the failures column counts: failed results and attempts with nothing to score."""
        return self.failed + self.failures

    # mean share of the baseline-to-speed-of-light gap closed, a failure counting 0 (the baseline
    # stays); None where no correct result has a speed of light. Unlike the speedup it cannot
    # pass 1 against a weak baseline (SOL-ExecBench's score)
    gap_closed: float | None = None


@dataclass(frozen=True)
class Board:
    timing_kind: str
    p: float
    by: str  # model | vendor: what the device column holds
    entries: tuple[Entry, ...]  # by family, then device, then rank
    infrastructure_errors: int = 0  # left out of every figure
    filters: dict[str, str | None] = field(default_factory=dict)
    failures: int = 0  # attempts with nothing to score, over every entry

    @property
    def ranked(self) -> bool:
        return self.timing_kind in RANKED_KINDS

    @property
    def label(self) -> str:
        return LABELS.get(self.timing_kind, self.timing_kind)

    def groups(self) -> list[tuple[str, str, list[Entry]]]:
        """(family, device, its entries in rank order), in board order."""
        out: list[tuple[str, str, list[Entry]]] = []
        for e in self.entries:
            if not out or (out[-1][0], out[-1][1]) != (e.family, e.device):
                out.append((e.family, e.device, []))
            out[-1][2].append(e)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "timing_kind": self.timing_kind,
            "label": self.label,
            "ranked": self.ranked,
            "p": self.p,
            "by": self.by,
            "filters": dict(self.filters),
            "infrastructure_errors": self.infrastructure_errors,
            "failures": self.failures,
            "entries": [asdict(e) for e in self.entries],
        }
