"""Turn a run's events into row models: one `Row` per evaluation job or agent attempt.

The engine reports through two callbacks (`core.orchestration.runs.execute`): `(store job id, event)` for
scheduler and harness events (transcripts with job id None) and `AttemptReport`s. Scheduler
events name jobs by their scheduler key, harness events by their store job id; this module
maps both onto rows, keeps live progress (stage, elapsed time, running speedup) and loads the
recorded `Result` from the store once a job is done. It knows nothing of Textual: screens read
`RunModel.rows` and `RunModel.transcripts`, and tests drive it directly.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from core.model import events
from core.model.keys import CHECK_MARK, FINAL_SUFFIX, parts  # the one key grammar
from core.model.result import Result
from core.orchestration.runs import AttemptReport
from core.store.db import Store

# What one callback delivered: an engine event with its store job id, or an attempt report.
RunItem = tuple[int | None, events.Event] | AttemptReport

TRANSCRIPT_CAP = 2000  # events kept per attempt in memory; the store keeps them all
ENDED_STATES = ("done", "failed", "cancelled")


@dataclass
class Row:
    """One line of the queue: an evaluation job (`kind` evaluation) or an agent attempt."""

    key: str  # evaluation: the job's key; attempt: the attempt id (<run>/<n>)
    kind: str  # evaluation | attempt
    label: str  # what the queue shows in its first column
    task: str
    family: str
    agent: str  # the candidate's name for an evaluation (starter, baseline, a path)
    device: str
    variant: str = ""
    state: str = (
        "queued"  # queued | running | checking | evaluating | retrying | done | failed | cancelled
    )
    stage: str = ""
    job_id: int | None = None  # the store job that holds the (final) result
    candidate: str | None = None
    started: float | None = None  # the clock's time when it began running (live runs only)
    ended: float | None = None
    seconds: float | None = None  # from the store, for rows that ran before the app opened
    stages: dict[str, str] = field(default_factory=dict)  # stage -> status, as it happens
    workload_speedups: list[float] = field(default_factory=list)
    checks: int = 0
    result: Result | None = None
    error: str | None = None
    fault: str | None = None  # infrastructure | error, from the scheduler
    stop_reason: str | None = None
    outcome: str | None = (
        None  # an attempt's: scored | starter | agent_error | no_submission (core/model/outcome.py)
    )
    marked_infrastructure: bool = (
        False  # a person said so in triage (kept in the store: `Store.mark_infrastructure`)
    )
    beat: events.Heartbeat | None = None  # the running stage's last heartbeat (engine, ≤ 10 s old)

    @property
    def heartbeat(self) -> str:
        """Where the running stage stands (`compile: workload n=1000 (1 of 2), 84 s of 180 s`)."""
        return self.beat.text() if self.beat is not None else ""

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return self.seconds
        return (self.ended if self.ended is not None else now) - self.started

    @property
    def correct(self) -> bool | None:
        """True when correctness (and generalization, once run) passed; False at the first failure."""
        stages = {s.name: s.status for s in self.result.stages} if self.result else self.stages
        ran = [
            stages.get(s)
            for s in ("correctness", "generalization")
            if stages.get(s) not in (None, "skipped")
        ]
        if not ran:
            return None
        return all(s == "passed" for s in ran)

    @property
    def speedup(self) -> float | None:
        if self.result is not None:
            return self.result.speedup if self.result.workloads or self.result.passed else None
        if self.workload_speedups:
            return math.exp(
                sum(math.log(max(s, 1e-12)) for s in self.workload_speedups)
                / len(self.workload_speedups)
            )
        return None

    @property
    def sol(self) -> float | None:
        return self.result.sol_fraction if self.result is not None else None

    @property
    def status(self) -> str:
        """The verdict when there is one, else the state."""
        if self.result is not None:
            return self.result.status
        return self.state


@dataclass
class RunModel:
    """Everything the screens show of one run, updated by `apply`."""

    store: Store
    run_id: str
    clock: Callable[[], float] = time.monotonic
    rows: dict[str, Row] = field(default_factory=dict)
    transcripts: dict[str, deque[events.TranscriptEvent]] = field(default_factory=dict)
    version: int = 0  # bumps on every change: screens redraw only when it moved
    results_version: int = 0  # bumps when a result lands: the leaderboard re-queries only then
    _job_rows: dict[int, str] = field(default_factory=dict)  # store job id -> row key
    _attempt_keys: dict[str, str] = field(
        default_factory=dict
    )  # attempt key (agent|task|...) -> attempt id

    # -- loading from the store ---------------------------------------------------------

    def reload(self) -> None:
        """Learn the run's jobs, attempts and results from the store: at start, for a run
        viewed after the fact, and whenever an event names a job or attempt not seen yet."""
        for a in self.store.attempts(self.run_id):
            self._attempt_keys[a.key] = a.id
            row = self.rows.get(a.id)
            if row is None:
                row = self.rows[a.id] = Row(
                    a.id,
                    "attempt",
                    a.id.rsplit("/", 1)[-1],
                    a.task_id,
                    a.family,
                    a.agent,
                    a.device_id,
                    a.variant,
                )
                row.state, row.seconds, row.checks, row.stop_reason, row.error = (
                    a.state,
                    a.seconds,
                    a.checks,
                    a.stop_reason,
                    a.error,
                )
                row.outcome = a.outcome
                if a.state == "running":
                    row.stage = "agent"
            if a.job_id is not None:
                row.job_id = a.job_id
                self._job_rows[a.job_id] = a.id
        for job in self.store.jobs(self.run_id):
            if job.key.endswith(FINAL_SUFFIX):
                attempt = self._attempt_keys.get(job.key[: -len(FINAL_SUFFIX)])
                if attempt is not None:
                    self._job_rows[job.id] = attempt
                    self.rows[attempt].job_id = self.rows[attempt].job_id or job.id
                    self.rows[attempt].candidate = job.candidate
                continue
            if job.key not in self.rows:
                candidate = job.agent or (
                    parts(job.key)[1] if len(parts(job.key)) >= 3 else (job.candidate or "")
                )  # a re-run of an attempt: its agent
                row = self.rows[job.key] = Row(
                    job.key,
                    "evaluation",
                    f"j{job.id}",
                    job.task_id,
                    job.family,
                    candidate,
                    job.device_id,
                )
                row.state = job.state
            self.rows[job.key].job_id = job.id
            self.rows[job.key].candidate = job.candidate
            self._job_rows[job.id] = job.key
        self._load_results()
        self.version += 1

    def _load_results(self) -> None:
        for r in self.store.results(self.run_id):
            key = self._job_rows.get(r.job_id)
            row = self.rows.get(key) if key else None
            if row is None or (row.result is not None and row.job_id == r.job_id):
                continue
            if row.job_id == r.job_id:
                row.marked_infrastructure = bool(r.infrastructure_marks)
                row.result = r.to_result()
                row.seconds = row.seconds or row.result.seconds
                self.results_version += 1

    # -- applying what the engine reports -----------------------------------------------

    def apply(self, items: Iterable[RunItem]) -> set[str]:
        """Apply a batch; returns the keys of the rows that changed."""
        changed: set[str] = set()
        results_due = False
        reload_due = False
        for item in items:
            if isinstance(item, AttemptReport):
                key = self._attempt(item)
                reload_due = (
                    reload_due or item.result is not None
                )  # its final job (candidate path) is in the store now
            else:
                key, due = self._event(*item)
                results_due = results_due or due
            if key:
                changed.add(key)
        if reload_due:
            self.reload()
        elif results_due:
            self._load_results()
        if changed:
            self.version += 1
        return changed

    def _row_for_job(self, job_id: int) -> Row | None:
        if job_id not in self._job_rows:
            self.reload()
        key = self._job_rows.get(job_id)
        return self.rows.get(key) if key else None

    def _row_for_key(self, scheduler_key: str) -> Row | None:
        """A scheduler key: `<job key>`, `<attempt key>|final` or `<attempt id>|check-N`."""
        if CHECK_MARK in scheduler_key:
            attempt_id = scheduler_key.split(CHECK_MARK)[0]
            if attempt_id not in self.rows:
                self.reload()
            return self.rows.get(attempt_id)
        if scheduler_key.endswith(FINAL_SUFFIX):
            base = scheduler_key[: -len(FINAL_SUFFIX)]
            if base not in self._attempt_keys:
                self.reload()
            attempt = self._attempt_keys.get(base)
            return self.rows.get(attempt) if attempt else None
        if scheduler_key not in self.rows:
            self.reload()
        return self.rows.get(scheduler_key)

    def _event(self, job_id: int | None, event: events.Event) -> tuple[str | None, bool]:
        now = self.clock()
        if isinstance(event, events.TranscriptEvent):
            buf = self.transcripts.setdefault(event.attempt, deque(maxlen=TRANSCRIPT_CAP))
            buf.append(event)
            row = self.rows.get(event.attempt)
            return (row.key if row else event.attempt), False
        if isinstance(event, events.JobStateChanged):
            row = self._row_for_key(event.job_id)
            if row is None:
                return None, False
            if CHECK_MARK in event.job_id:  # the agent ran `arena check`: the attempt is checking
                if event.state == "running":
                    row.checks += 1
                    row.stage = "check"
                elif event.state in ENDED_STATES and row.state not in ENDED_STATES:
                    row.stage = "agent"
                return row.key, False
            if row.kind == "attempt":  # its final evaluation
                if event.state == "running":
                    row.state, row.stage = "evaluating", "compile"
                return row.key, event.state == "done"
            row.state = event.state
            row.fault = event.fault or row.fault
            if event.state == "running" and row.started is None:
                row.started = now
            if event.state in ENDED_STATES:
                row.ended = now
                row.stage, row.beat = "", None
                if event.state == "failed":
                    row.error = event.reason
            return row.key, event.state == "done"
        if job_id is None:
            return None, False
        row = self._row_for_job(job_id)
        if row is None:
            return None, False
        if isinstance(event, events.Heartbeat):
            row.stage, row.beat = event.stage, event
        elif isinstance(event, events.StageStarted):
            row.stage, row.beat = event.stage, None
        elif isinstance(event, events.StageFinished):
            row.stages[event.stage] = event.status
            row.beat = None
        elif isinstance(event, events.WorkloadTimed):
            cand, base = event.candidate.get("median_us"), event.baseline.get("median_us")
            if cand and base:
                row.workload_speedups.append(base / cand)
        elif isinstance(event, events.EvaluationStarted):
            row.stages.clear()
            row.workload_speedups.clear()
        return row.key, False

    def _attempt(self, report: AttemptReport) -> str | None:
        if report.attempt_id not in self.rows:
            self.reload()
        row = self.rows.get(report.attempt_id)
        if row is None:
            return None
        now = self.clock()
        row.state = report.state
        row.stop_reason = report.stop_reason or row.stop_reason
        row.error = report.error or row.error
        row.outcome = report.outcome if report.state != "running" else None
        if report.outcome_reason and report.outcome != "scored":
            row.error = report.outcome_reason
        if report.state == "running":
            row.started, row.ended, row.stage, row.result = now, None, "agent", None
            row.stages.clear()
            row.workload_speedups.clear()
        else:
            row.ended = now
            row.stage, row.beat = "", None
        if report.result is not None:
            row.result = report.result
            self.results_version += 1
        return row.key

    # -- queries the screens share ------------------------------------------------------

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.rows.values():
            out[row.state] = out.get(row.state, 0) + 1
        return out

    def transcript(self, attempt_id: str) -> list[events.TranscriptEvent]:
        """Live events when the app saw them, else what the store kept (a finished run)."""
        live = self.transcripts.get(attempt_id)
        if live:
            return list(live)
        try:
            kept = self.store.transcript(attempt_id)
        except Exception:  # noqa: BLE001 - an attempt with no transcript yet
            return []
        if kept:
            self.transcripts[attempt_id] = deque(kept, maxlen=TRANSCRIPT_CAP)
        return kept
