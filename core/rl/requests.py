"""The reward API's data: `EvalRequest` (one evaluation of a batch, from a mapping or a pair too),
`check_source` (what a candidate's source may be) and `RewardedResult` (a Result and its reward)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.evaluation.profiles import parse_profile
from core.evaluation.scoring import gap_closed
from core.model.result import Result
from core.model.task import Task
from core.rl.public import public_result
from core.rl.rewards import outcome

MAX_SOURCE_BYTES = 1 << 20  # a candidate module larger than 1 MiB is not a kernel


@dataclass(frozen=True)
class EvalRequest:
    """One evaluation of a batch. `device` None: any device of the batch. `visible_only`:
    leave the hidden workloads out (an episode's turns); `performance=False`: time nothing."""

    task_id: str
    source: str
    seed: int | None = None
    device: str | None = None
    visible_only: bool = False
    performance: bool = True
    profile: str = "full"  # `full` or `train` (core/evaluation/profiles.py): what is timed, for how long, under which limits

    def __post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id:
            raise ValueError(
                f"task_id: give a task id such as elementwise/rope, got {self.task_id!r}"
            )
        check_source(self.source)
        if self.seed is not None and (
            not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0
        ):
            raise ValueError(f"seed: give a non-negative integer or None, got {self.seed!r}")
        object.__setattr__(self, "profile", parse_profile(self.profile).value)

    def batch_key(self) -> tuple[Any, ...]:
        """Requests with equal keys can share one batch (the same workloads, seeds and timing)."""
        return (
            self.task_id,
            self.seed,
            self.device,
            self.visible_only,
            self.performance,
            self.profile,
        )

    @classmethod
    def coerce(cls, item: EvalRequest | Mapping[str, Any] | Sequence[Any]) -> EvalRequest:
        """An EvalRequest from itself, a mapping of its fields, or a (task_id, source) pair."""
        if isinstance(item, EvalRequest):
            return item
        if isinstance(item, Mapping):
            unknown = sorted(set(item) - set(cls.__dataclass_fields__))
            if unknown:
                raise ValueError(
                    f"request field `{unknown[0]}` is unknown: use {', '.join(cls.__dataclass_fields__)}"
                )
            return cls(**item)
        if isinstance(item, (tuple, list)) and len(item) == 2:
            return cls(item[0], item[1])
        raise TypeError(
            f"a request is an EvalRequest, a mapping or a (task_id, source) pair, got {type(item).__name__}"
        )


def check_source(source: object) -> str:
    if not isinstance(source, str):
        raise TypeError(
            f"source: give the candidate's Python source as a string, got {type(source).__name__}"
        )
    if len(source.encode(errors="replace")) > MAX_SOURCE_BYTES:
        raise ValueError(
            f"source: {len(source.encode(errors='replace'))} bytes, more than the {MAX_SOURCE_BYTES} allowed: send one module"
        )
    return source


@dataclass
class RewardedResult:
    """A Result and its reward. `reward` None means an infrastructure fault: not the
    candidate's doing, so the trainer should retry the evaluation rather than learn from it."""

    result: Result
    reward: float | None
    reward_name: str
    visible_only: bool = False
    task: Task | None = field(default=None, repr=False, compare=False)

    @property
    def outcome(self) -> str:
        return outcome(self.result)

    @property
    def retry(self) -> bool:
        return self.reward is None

    @property
    def stages(self) -> dict[str, str]:
        return {s.name: s.status for s in self.result.stages}

    @property
    def speedup(self) -> float:
        return self.result.speedup

    @property
    def sol_fraction(self) -> float | None:
        return self.result.sol_fraction

    @property
    def gap_closed(self) -> float | None:
        """The share of the baseline-to-speed-of-light gap closed (core/evaluation/scoring.py);
        None unless correct and the device has a speed of light."""
        if self.outcome != "correct":
            return None
        return gap_closed(self.result.speedup, self.result.sol_fraction)

    @property
    def profile(self) -> str | None:
        return self.result.profile

    @property
    def integrity_flags(self) -> list[str]:
        return self.result.integrity_flags

    @property
    def review_notes(self) -> list[str]:
        return self.result.review_notes

    def to_json(self, public: bool = True) -> dict[str, Any]:
        """`public=True` (the default) names no hidden workload: safe to show a policy."""
        return {
            "reward": self.reward,
            "reward_name": self.reward_name,
            "outcome": self.outcome,
            "retry": self.retry,
            "visible_only": self.visible_only,
            "profile": self.profile,
            "gap_closed": self.gap_closed,
            "result": public_result(self.result, self.task) if public else self.result.to_json(),
        }
