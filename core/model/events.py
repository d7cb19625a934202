"""The one versioned event schema that flows from the engine to every front end.

Each event is one JSON object per line: `{"v": SCHEMA_VERSION, "type": ..., ...fields}`.
The harness writes these as plain dicts (it may not import this module: it ships alone);
`parse` turns a line into the typed event here, and `test_events.py` keeps the two in step.
The scheduler's job and device state changes live here too, and the agents' transcripts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

SCHEMA_VERSION = 1


class EventError(ValueError):
    """A line that is not an event of this schema version."""


@dataclass(frozen=True)
class EvaluationStarted:
    type: ClassVar[str] = "evaluation_started"
    task_id: str
    device: dict[str, Any]
    versions: dict[str, Any]


@dataclass(frozen=True)
class StageStarted:
    type: ClassVar[str] = "stage_started"
    stage: str


@dataclass(frozen=True)
class StageFinished:
    """status: passed | failed | timeout | crashed | error (error = not the candidate's fault)."""

    type: ClassVar[str] = "stage_finished"
    stage: str
    status: str
    seconds: float
    message: str | None = None
    fault: str | None = None
    log: str = ""
    note: str | None = None
    workloads: int | None = None


@dataclass(frozen=True)
class WorkloadChecked:
    type: ClassVar[str] = "workload_checked"
    stage: str
    workload: str
    axes: dict[str, int]
    passed: bool
    message: str | None = None
    worst: dict[str, Any] | None = None


@dataclass(frozen=True)
class WorkloadTimed:
    type: ClassVar[str] = "workload_timed"
    workload: str
    axes: dict[str, int]
    mode: str | None
    rounds: int
    candidate: dict[str, Any]
    baseline: dict[str, Any]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    """What the harness found about the candidate's conduct (docs/integrity.md). `proven`
    findings become integrity flags and fail the evaluation; the others are review notes."""

    type: ClassVar[str] = "finding"
    check: str
    proven: bool
    message: str
    stage: str | None = None
    workload: str | None = None


@dataclass(frozen=True)
class EvaluationFinished:
    """fault: None when every stage passed, `candidate` or `infrastructure` otherwise."""

    type: ClassVar[str] = "evaluation_finished"
    status: str
    fault: str | None = None
    seconds: float | None = None
    error: str | None = None
    # What the candidate's @triton.autotune kernels tried (core/harness/autotune.py): per
    # kernel {kernel, tunings, tried, offered, budget}; None where none autotuned.
    autotune: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Heartbeat:
    """While a stage runs, at least every 10 s: which stage, which workload (the next one in the
    job's order: `done` of `total` finished), how long the stage has run and its limit. Sent by
    the engine (core/evaluation/heartbeat.py), not the harness, so that a candidate that hangs
    still shows progress; a front end shows it and forgets it (it is never stored)."""

    type: ClassVar[str] = "heartbeat"
    stage: str
    elapsed_s: float
    limit_s: float | None = None
    workload: str | None = None
    done: int = 0
    total: int | None = None

    def text(self) -> str:
        """`correctness: workload n=4097 (2 of 3), 12 s of 300 s`, as every front end says it."""
        where = ""
        if self.workload is not None:
            count = f" ({self.done + 1} of {self.total})" if self.total else ""
            where = f": workload {self.workload}{count}"
        limit = f" of {self.limit_s:.0f} s" if self.limit_s else ""
        return f"{self.stage}{where}, {self.elapsed_s:.0f} s{limit}"


@dataclass(frozen=True)
class HarnessReady:
    type: ClassVar[str] = "harness_ready"
    pid: int


@dataclass(frozen=True)
class JobStateChanged:
    """A scheduler job moved: queued → running → done | failed | cancelled, or running →
    retrying → running after an infrastructure fault. `attempt` counts the runs started so far
    (0 while queued); `device` and `slot` say where it runs or ran; `fault` is `infrastructure`
    or `error` (the runner itself raised: a bug in the caller) for retrying and failed."""

    type: ClassVar[str] = "job_state_changed"
    job_id: str
    state: str
    device: str | None = None
    slot: int | None = None
    attempt: int = 0
    reason: str | None = None
    fault: str | None = None


@dataclass(frozen=True)
class DeviceHealthChanged:
    """The scheduler stopped (healthy=False, after consecutive infrastructure faults) or
    resumed (healthy=True) sending jobs to a device."""

    type: ClassVar[str] = "device_health_changed"
    device: str
    healthy: bool
    reason: str | None = None


TRANSCRIPT_KINDS = ("text", "thinking", "tool_call", "tool_result", "usage", "final", "error")


@dataclass(frozen=True, kw_only=True)
class StepDetail:
    """What one transcript step says, by keyword: an agent's `Step` and the `TranscriptEvent`
    it becomes once the runner stamps attempt, agent and sequence number on it."""

    text: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    call_id: str | None = None
    is_error: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    cumulative: bool = False
    raw: str | None = None


@dataclass(frozen=True)
class Step(StepDetail):
    """A transcript event before the runner stamps attempt, agent and sequence number on it."""

    kind: str  # text | thinking | tool_call | tool_result | usage | final | error


@dataclass(frozen=True)
class TranscriptEvent(StepDetail):
    """One normalized step of an agent's transcript, whatever tool produced it.

    kind: text | thinking | tool_call | tool_result | usage | final | error. `attempt` names the
    attempt (run × agent × task × device × variant); `seq` orders its events. `text` holds the
    prose, the tool result or the error; `tool` and `arguments` a tool call (`call_id` pairs a
    call with its result); usage carries tokens and cost (cumulative when the agent reports
    them so, `cumulative` says). `raw` is the agent's own line, kept verbatim for audit."""

    type: ClassVar[str] = "transcript"
    attempt: str
    seq: int
    kind: str
    agent: str

    def __post_init__(self) -> None:
        if self.kind not in TRANSCRIPT_KINDS:
            raise EventError(
                f"transcript kind {self.kind!r} is none of {', '.join(TRANSCRIPT_KINDS)}"
            )


Event = (
    EvaluationStarted
    | StageStarted
    | StageFinished
    | WorkloadChecked
    | WorkloadTimed
    | Finding
    | EvaluationFinished
    | Heartbeat
    | HarnessReady
    | JobStateChanged
    | DeviceHealthChanged
    | TranscriptEvent
)
EVENT_TYPES: dict[str, type] = {cls.type: cls for cls in Event.__args__}  # type: ignore[attr-defined]


def parse(line: str | bytes | dict[str, Any]) -> Event:
    try:
        data = line if isinstance(line, dict) else json.loads(line)
    except json.JSONDecodeError as exc:
        raise EventError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise EventError("an event is a JSON object")
    if data.get("v") != SCHEMA_VERSION:
        raise EventError(
            f"schema version {data.get('v')!r}; this arena reads version {SCHEMA_VERSION}"
        )
    cls = EVENT_TYPES.get(data.get("type", ""))
    if cls is None:
        raise EventError(f"unknown event type {data.get('type')!r}")
    known = {f.name for f in fields(cls)}
    try:
        event: Event = cls(**{k: v for k, v in data.items() if k in known})
        return event
    except TypeError as exc:
        raise EventError(f"{data.get('type')}: {exc}") from None


def to_json(event: Event) -> dict[str, Any]:
    data = asdict(event)
    # the positional fields first (a transcript event's attempt, seq, kind, agent), as written
    first = {f.name: data[f.name] for f in fields(event) if not f.kw_only}
    return {"v": SCHEMA_VERSION, "type": event.type, **first, **data}
