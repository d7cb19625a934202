"""The rows the store gives back (`Run`, `Job`, `ResultRow`, `Attempt`, `EventRow`), the states
they may be in, and the conversions between SQLite rows, JSON and `Result`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from core.model.owner import Owner
from core.model.result import Result, StageResult, WorkloadFigures
from core.store.errors import StoreError

RUN_STATUSES = ("running", "finished", "interrupted", "cancelled")
# Shown, never stored: a `running` run whose owner process is gone (killed, crashed, its host
# down) is `stale`; it resumes like an interrupted one (core/store/leases.py).
STALE = "stale"
HEARTBEAT_S = 10.0  # how often a run's owner renews its lease (core/store/leases.py)
STALE_AFTER_S = 60.0  # an owner on another host whose heartbeat is older than this is gone
JOB_STATES = ("queued", "running", "done", "failed", "cancelled")
PENDING_STATES = ("queued", "running")
JOB_KINDS = ("evaluation",)
FLAG_KINDS = ("integrity", "review", "infrastructure")
RESULT_FLAG_KINDS = (
    "integrity",
    "review",
)  # written with the result; `infrastructure` is a person's mark
ATTEMPT_STATES = ("queued", "running", "evaluating", "done", "failed", "cancelled")
EXPORT_VERSION = 1
BUSY_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class Run:
    id: str
    name: str
    created_at: str
    finished_at: str | None
    status: str
    spec: dict[str, Any]
    job_states: dict[str, int] = field(default_factory=dict)  # state -> number of jobs
    result_statuses: dict[str, int] = field(
        default_factory=dict
    )  # passed | failed | infrastructure_error -> number
    lease: Lease | None = None  # who executes it (a running run), or who last did (a stale one)


@dataclass(frozen=True)
class Lease:
    """The process that executes a run: it took the lease when it created or resumed the run
    and renews `heartbeat_at` every HEARTBEAT_S while it runs."""

    owner: Owner
    heartbeat_at: str

    def age_s(self, now: datetime | None = None) -> float:
        beat = datetime.fromisoformat(self.heartbeat_at.replace("Z", "+00:00"))
        return ((now or datetime.now(timezone.utc)) - beat).total_seconds()

    def live(self, stale_after_s: float) -> bool:
        """Its process still runs: checked directly on this host; elsewhere, a heartbeat
        younger than `stale_after_s` says so."""
        alive = self.owner.alive()
        return self.age_s() < stale_after_s if alive is None else alive

    def describe(self) -> str:
        return f"{self.owner.describe()} (last heartbeat {self.age_s():.0f} s ago)"


def lease_from(r: sqlite3.Row) -> Lease | None:
    if r["owner_pid"] is None:
        return None
    return Lease(
        Owner(int(r["owner_pid"]), r["owner_host"] or "", r["owner_token"] or ""),
        r["heartbeat_at"] or "",
    )


@dataclass(frozen=True)
class Job:
    id: int
    run_id: str
    key: str
    kind: str
    task_id: str
    family: str
    candidate: str | None
    candidate_sha256: str | None
    device_id: str
    agent: str | None
    variant: str | None
    priority: int
    state: str
    attempts: int
    created_at: str
    updated_at: str
    seed: int | None = (
        None  # the secret seed of its evaluation (set when it first runs); never shown to agents
    )


@dataclass(frozen=True)
class ResultRow:
    job_id: int
    status: str
    failed_stage: str | None
    speedup: float
    sol_fraction: float | None
    points: float
    timing_kind: str
    candidate_sha256: str
    device_id: str
    device_model: str | None
    device_vendor: str | None
    created_at: str
    result: dict[str, Any]  # Result.to_json()
    integrity_flags: tuple[str, ...] = ()
    review_notes: tuple[str, ...] = ()
    infrastructure_marks: tuple[
        str, ...
    ] = ()  # a person marked it an infrastructure fault (with a note); the result is kept as it was

    def to_result(self) -> Result:
        """The `Result` this row was recorded from."""
        return result_from_json(self.result)


@dataclass(frozen=True)
class Attempt:
    id: str
    run_id: str
    key: str
    agent: str
    agent_kind: str
    model: str | None
    task_id: str
    family: str
    device_id: str
    variant: str
    iteration: int
    state: str
    stop_reason: str | None
    exit_status: int | None
    job_id: int | None
    folder: str | None
    submission: str | None
    checks: int
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    seconds: float | None
    sandbox: str | None
    error: str | None
    started_at: str | None
    finished_at: str | None
    created_at: str
    updated_at: str
    outcome: str | None = (
        None  # scored | starter | agent_error | no_submission (core/model/outcome.py); None: before schema 4
    )
    outcome_reason: str | None = None


@dataclass(frozen=True)
class EventRow:
    run_id: str
    job_id: int | None
    seq: int
    type: str
    event: dict[str, Any]  # JSON as core/model/events.py writes it; `events.parse` makes it typed
    created_at: str


def result_from_json(data: Mapping[str, Any]) -> Result:
    """Rebuild a `Result` from its `to_json()` form (fields this version does not know are dropped)."""
    known = {f.name for f in fields(Result)}
    values = {k: v for k, v in data.items() if k in known}
    stage_fields = {f.name for f in fields(StageResult)}
    workload_fields = {f.name for f in fields(WorkloadFigures)}
    values["stages"] = [
        StageResult(**{k: v for k, v in s.items() if k in stage_fields})
        for s in data.get("stages", [])
    ]
    values["workloads"] = [
        WorkloadFigures(**{k: v for k, v in w.items() if k in workload_fields})
        for w in data.get("workloads", [])
    ]
    return Result(**values)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"{what} is not JSON-ready ({exc}): pass plain dicts, lists, strings and numbers"
        ) from None


def attempt_from(r: sqlite3.Row) -> Attempt:
    return Attempt(**{f.name: r[f.name] for f in fields(Attempt)})


def job_from(r: sqlite3.Row) -> Job:
    return Job(**{f.name: r[f.name] for f in fields(Job)})


def result_row_from(r: sqlite3.Row, flags: dict[str, list[str]]) -> ResultRow:
    return ResultRow(
        job_id=r["job_id"],
        status=r["status"],
        failed_stage=r["failed_stage"],
        speedup=r["speedup"],
        sol_fraction=r["sol_fraction"],
        points=r["points"],
        timing_kind=r["timing_kind"],
        candidate_sha256=r["candidate_sha256"],
        device_id=r["device_id"],
        device_model=r["device_model"],
        device_vendor=r["device_vendor"],
        created_at=r["created_at"],
        result=json.loads(r["result"]),
        integrity_flags=tuple(flags.get("integrity", ())),
        review_notes=tuple(flags.get("review", ())),
        infrastructure_marks=tuple(flags.get("infrastructure", ())),
    )
