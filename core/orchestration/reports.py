"""What a run tells its front ends and hands its scheduler: `AttemptReport` (an attempt started
or ended), `RunOutcome` (what one execution did), the two callbacks, and the scheduler jobs'
payloads (`EvalRequest`: one candidate; `BatchRequest`: one task's candidates as a batch)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.model import events
from core.model.result import Result
from core.model.task import Task

OnRunEvent = Callable[
    [int | None, events.Event], None
]  # (store job id, event); transcripts too, with job id None
OnAttempt = Callable[["AttemptReport"], None]


@dataclass(frozen=True)
class AttemptReport:
    """What a front end hears of an attempt: it started, or it ended (with its result)."""

    attempt_id: str
    agent: str
    task_id: str
    device: str
    variant: str
    state: str  # running | done | failed | cancelled
    stop_reason: str | None = None
    result: Result | None = (
        None  # None on `done`: the agent produced nothing to score (see outcome)
    )
    error: str | None = None
    outcome: str | None = (
        None  # on `done`: scored | starter | agent_error | no_submission (core/model/outcome.py)
    )
    outcome_reason: str | None = None


@dataclass(frozen=True)
class EvalRequest:
    """A scheduler job's payload: evaluate `candidate` on `task`; `job_id` is the store's job
    that keeps the result (None: an `arena check`, kept nowhere but in the agent's transcript)."""

    task: Task
    candidate: Path
    job_id: int | None
    visible_only: bool = False
    on_event: Callable[[events.Event], None] | None = None


@dataclass(frozen=True)
class BatchRequest:
    """A scheduler job's payload: candidates of one task on one device as one batch
    (core/evaluation/batch.py), on the same secret seed; `job_ids` are their store jobs, in order."""

    task: Task
    candidates: tuple[Path, ...]
    job_ids: tuple[int, ...]
    seed: int
    keys: tuple[
        str, ...
    ] = ()  # their plan keys (the scheduler ids a job of its own would have), in order


@dataclass
class RunOutcome:
    run_id: str
    results: list[Result] = field(default_factory=list)
    failed_jobs: list[str] = field(default_factory=list)  # infrastructure faults past their retries
    interrupted: bool = False
    attempts: list[AttemptReport] = field(
        default_factory=list
    )  # the attempts that ended in this execution
