"""The nouns of one agent attempt: the `Attempt` (run x agent x task x device x variant x
iteration) and its stable key, what the agent reported spending (`Usage`), how its agent phase
and the whole attempt ended (`AgentOutcome`, `AttemptOutcome`), and the `Transcript` that stamps
the agent's steps into events, counts its usage and asks for a stop at a cap."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.agents.base import AgentConfig, Step
from core.agents.workspace import Variant
from core.model import events, keys
from core.model.outcome import Activity, Outcome, Verdict
from core.model.result import Result
from core.model.task import Task

STOP_REASONS = ("finished", "budget", "cost_cap", "token_cap", "crashed", "cancelled")


# (candidate file, visible only?, progress callback) -> Result, through the run's scheduler
Evaluate = Callable[[Path, bool, Callable[[events.Event], None] | None], Awaitable[Result]]
OnTranscript = Callable[[events.TranscriptEvent], None]


@dataclass(frozen=True)
class Attempt:
    """One attempt: run × agent × task × device × variant (× iteration)."""

    id: str  # `<run id>/<n>`
    run_id: str
    agent: AgentConfig
    task: Task
    device: str
    variant: Variant = field(default_factory=Variant)
    iteration: int = 0

    @property
    def key(self) -> str:
        """Stable across resumes: what the store finds the attempt by."""
        return attempt_key(
            self.agent.name, self.task.id, self.device, self.variant.name, self.iteration
        )

    @property
    def slug(self) -> str:
        """The attempt's folder name: short (the check socket's path lives under it)."""
        return (
            self.id.rsplit("/", 1)[-1]
            + "-"
            + "".join(
                c if c.isalnum() or c in "-_." else "_"
                for c in f"{self.agent.name}-{self.task.name}"
            )[:40]
        )


def attempt_key(agent: str, task_id: str, device: str, variant: str, iteration: int) -> str:
    return keys.attempt_key(agent, task_id, device, variant, iteration)


@dataclass
class Usage:
    """What the agent reported spending. Cumulative reports (running totals) and increments are
    kept apart, and the larger of the two counts: an agent that reports both per-turn usage and
    a session total is not counted twice."""

    cumulative: dict[str, float] = field(default_factory=dict)
    summed: dict[str, float] = field(default_factory=dict)

    def add(self, step: Step) -> None:
        for name in ("input_tokens", "output_tokens", "cost_usd"):
            value = getattr(step, name)
            if value is None:
                continue
            if step.cumulative:
                self.cumulative[name] = max(self.cumulative.get(name, 0.0), float(value))
            else:
                self.summed[name] = self.summed.get(name, 0.0) + float(value)

    def get(self, name: str) -> float | None:
        if name not in self.cumulative and name not in self.summed:
            return None
        return max(self.cumulative.get(name, 0.0), self.summed.get(name, 0.0))

    @property
    def tokens(self) -> int | None:
        parts = [self.get("input_tokens"), self.get("output_tokens")]
        return None if all(p is None for p in parts) else int(sum(p or 0 for p in parts))

    @property
    def cost_usd(self) -> float | None:
        return self.get("cost_usd")

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": _int(self.get("input_tokens")),
            "output_tokens": _int(self.get("output_tokens")),
            "cost_usd": self.cost_usd,
        }


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


@dataclass
class AgentOutcome:
    stop_reason: str
    exit_status: int | None
    seconds: float
    usage: Usage
    checks: int
    sandbox_status: str | None = None
    error: str | None = None
    verdict: Verdict = field(
        default_factory=lambda: Verdict(Outcome.SCORED)
    )  # did the agent produce something to score?

    @property
    def outcome(self) -> str:
        return self.verdict.outcome.value


@dataclass
class AttemptOutcome:
    attempt: Attempt
    agent: AgentOutcome
    submission: Path
    result: Result | None  # None: the agent produced nothing to score (agent_error, no_submission)


class Transcript:
    """Stamps steps into events (attempt, agent, seq), counts usage, and asks for a stop at a cap."""

    def __init__(
        self, attempt: Attempt, on_event: OnTranscript | None, stop: Callable[[str], None]
    ):
        self.attempt, self.on_event, self.stop = attempt, on_event, stop
        self.seq = 0
        self.usage = Usage()
        self.actions = 0
        self.errors: list[str] = []

    def activity(self) -> Activity:
        return Activity(self.actions, tuple(self.errors))

    def emit(self, step: Step) -> None:
        self.seq += 1
        if step.kind == "tool_call":
            self.actions += 1
        elif step.kind == "error" and step.text:
            self.errors.append(step.text)
        event = events.TranscriptEvent(
            attempt=self.attempt.id, seq=self.seq, agent=self.attempt.agent.name, **step.__dict__
        )
        if self.on_event is not None:
            self.on_event(event)
        if step.kind == "usage":
            self.usage.add(step)
            config = self.attempt.agent
            if (
                config.max_cost_usd is not None
                and (self.usage.cost_usd or 0.0) > config.max_cost_usd
            ):
                self.stop("cost_cap")
            elif config.max_tokens is not None and (self.usage.tokens or 0) > config.max_tokens:
                self.stop("token_cap")
