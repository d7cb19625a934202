"""The store's jobs, their results (with their flags) and their events: one job per candidate and
workload set, a result committed before `record_result` returns."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

from core.model import events
from core.model.result import Result
from core.store import rows
from core.store.base import StoreBase
from core.store.errors import StoreError, UnknownRunError
from core.store.rows import (
    JOB_KINDS,
    JOB_STATES,
    RESULT_FLAG_KINDS,
    EventRow,
    Job,
    ResultRow,
    dumps,
    job_from,
    result_row_from,
)


class JobStore(StoreBase):
    """Jobs, results and events of a run (mixed into `core.store.db.Store`)."""

    def add_job(
        self,
        run_id: str,
        *,
        task_id: str,
        device_id: str,
        candidate: str | Path | None = None,
        candidate_sha256: str | None = None,
        family: str | None = None,
        kind: str = "evaluation",
        agent: str | None = None,
        variant: str | None = None,
        priority: int = 0,
        key: str | None = None,
    ) -> int:
        """Queue a job; returns its id. Idempotent on `key`: a job whose key the run already has is
        not added again, and the existing job's id is returned (whatever its state).

        The key defaults to kind, task, device, candidate sha256, agent and variant, so resuming a
        run with the same spec finds its jobs; pass a key of your own to repeat an evaluation.
        The sha256 is read from the candidate file when not given and the file exists.
        """
        if kind not in JOB_KINDS:
            raise StoreError(f"job kind `{kind}` is not one of {', '.join(JOB_KINDS)}")
        if candidate is not None and candidate_sha256 is None and Path(candidate).is_file():
            candidate_sha256 = hashlib.sha256(Path(candidate).read_bytes()).hexdigest()
        if key is None:
            key = "|".join(
                str(x or "")
                for x in (kind, task_id, device_id, candidate_sha256 or candidate, agent, variant)
            )
        full = self._resolve_run(run_id)
        now = rows.utc_now()
        with self._write(f"add a job to run {full}") as db:
            existing = self._existing_id(db, "jobs", full, key)
            if existing is not None:
                return int(existing)
            cursor = db.execute(
                "INSERT INTO jobs (run_id, key, kind, task_id, family, candidate, candidate_sha256, device_id, agent, variant, priority,"
                " state, attempts, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?)",
                (
                    full,
                    key,
                    kind,
                    task_id,
                    family or task_id.split("/")[0],
                    str(Path(candidate).resolve()) if candidate is not None else None,
                    candidate_sha256,
                    device_id,
                    agent,
                    variant,
                    priority,
                    now,
                    now,
                ),
            )
            return int(cursor.lastrowid)  # type: ignore[arg-type]

    def get_job(self, job_id: int) -> Job:
        rows = self._read("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            raise StoreError(f"unknown job {job_id}: see `arena runs show RUN` for a run's jobs")
        return job_from(rows[0])

    def set_job_state(self, job_id: int, state: str, attempts: int | None = None) -> None:
        if state not in JOB_STATES:
            raise StoreError(f"job state `{state}` is not one of {', '.join(JOB_STATES)}")
        with self._write(f"update job {job_id}") as db:
            cursor = db.execute(
                "UPDATE jobs SET state = ?, attempts = coalesce(?, attempts), updated_at = ? WHERE id = ?",
                (state, attempts, rows.utc_now(), job_id),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"unknown job {job_id}: add it with add_job first")

    def set_job_seed(self, job_id: int, seed: int) -> int:
        """Keep the secret seed of the job's evaluation, unless it has one already (a retry, a
        resume or a replay reuses it); returns the seed the job keeps."""
        with self._write(f"set the seed of job {job_id}") as db:
            row = db.execute("SELECT seed FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise StoreError(f"unknown job {job_id}: add it with add_job first")
            if row[0] is not None:
                return int(row[0])
            db.execute(
                "UPDATE jobs SET seed = ?, updated_at = ? WHERE id = ?",
                (seed, rows.utc_now(), job_id),
            )
            return seed

    def jobs(self, run_id: str, state: str | None = None) -> list[Job]:
        """The run's jobs in the order they were added, optionally only those in `state`."""
        full = self._resolve_run(run_id)
        if state is not None and state not in JOB_STATES:
            raise StoreError(f"job state `{state}` is not one of {', '.join(JOB_STATES)}")
        sql = "SELECT * FROM jobs WHERE run_id = ?"
        params: tuple[Any, ...] = (full,)
        if state is not None:
            sql, params = sql + " AND state = ?", (full, state)
        return [job_from(r) for r in self._read(sql + " ORDER BY id", params)]

    def pending_jobs(self, run_id: str) -> list[Job]:
        """Jobs still to do: queued ones, and running ones (the run was interrupted under them),
        highest priority first, then in the order they were added."""
        full = self._resolve_run(run_id)
        rows = self._read(
            "SELECT * FROM jobs WHERE run_id = ? AND state IN ('queued', 'running') ORDER BY priority DESC, id",
            (full,),
        )
        return [job_from(r) for r in rows]

    def record_result(self, job_id: int, result: Result) -> None:
        """Write the result, its flags and the job's new state in one transaction; returns once
        committed. The job becomes `done` when the evaluation reached a verdict (passed or failed),
        `failed` on an infrastructure error. Recording a job again replaces its result and flags."""
        data = result.to_json()
        blob = dumps(data, f"the result of job {job_id}")
        device = result.device or {}
        state = "failed" if result.status == "infrastructure_error" else "done"
        now = rows.utc_now()
        with self._write(f"record the result of job {job_id}") as db:
            if db.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise StoreError(
                    f"unknown job {job_id}: add it with add_job before recording its result"
                )
            db.execute(
                "INSERT INTO results (job_id, status, failed_stage, speedup, sol_fraction, points, timing_kind, candidate_sha256,"
                " device_id, device_model, device_vendor, schema_version, result, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (job_id) DO UPDATE SET status = excluded.status, failed_stage = excluded.failed_stage,"
                " speedup = excluded.speedup, sol_fraction = excluded.sol_fraction, points = excluded.points,"
                " timing_kind = excluded.timing_kind, candidate_sha256 = excluded.candidate_sha256, device_id = excluded.device_id,"
                " device_model = excluded.device_model, device_vendor = excluded.device_vendor,"
                " schema_version = excluded.schema_version, result = excluded.result, created_at = excluded.created_at",
                (
                    job_id,
                    result.status,
                    result.failed_stage,
                    result.speedup,
                    result.sol_fraction,
                    result.points,
                    result.timing_kind,
                    result.candidate_sha256,
                    device.get("id", ""),
                    device.get("model"),
                    device.get("vendor"),
                    result.schema_version,
                    blob,
                    now,
                ),
            )
            db.execute(
                f"DELETE FROM flags WHERE job_id = ? AND kind IN {RESULT_FLAG_KINDS}", (job_id,)
            )  # a person's mark stays
            db.executemany(
                "INSERT INTO flags (job_id, kind, text) VALUES (?, ?, ?)",
                [(job_id, "integrity", str(t)) for t in result.integrity_flags]
                + [(job_id, "review", str(t)) for t in result.review_notes],
            )
            db.execute(
                "UPDATE jobs SET state = ?, updated_at = ? WHERE id = ?", (state, now, job_id)
            )
        self._notify(job_id)

    def results(self, run_id: str) -> list[ResultRow]:
        """The run's results, in the order its jobs were added."""
        full = self._resolve_run(run_id)
        rows = self._read(
            "SELECT r.* FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.run_id = ? ORDER BY j.id",
            (full,),
        )
        flags = self._flags(full)
        return [result_row_from(r, flags.get(r["job_id"], {})) for r in rows]

    def mark_infrastructure(self, job_id: int, note: str = "", marked: bool = True) -> None:
        """A person's verdict on a result: an infrastructure fault (the device, not the candidate),
        with a note. The result itself is kept as recorded (audit); the leaderboard leaves a marked
        result out as it does an infrastructure error. `marked=False` removes the mark."""
        with self._write(f"mark the result of job {job_id}") as db:
            if db.execute("SELECT 1 FROM results WHERE job_id = ?", (job_id,)).fetchone() is None:
                raise StoreError(f"job {job_id} has no result to mark: see `arena runs show RUN`")
            db.execute("DELETE FROM flags WHERE job_id = ? AND kind = 'infrastructure'", (job_id,))
            if marked:
                db.execute(
                    "INSERT INTO flags (job_id, kind, text) VALUES (?, 'infrastructure', ?)",
                    (job_id, note or "marked by a person"),
                )
        self._notify(job_id)

    def _flags(self, run_id: str) -> dict[int, dict[str, list[str]]]:
        out: dict[int, dict[str, list[str]]] = {}
        for r in self._read(
            "SELECT f.job_id, f.kind, f.text FROM flags f JOIN jobs j ON j.id = f.job_id WHERE j.run_id = ? ORDER BY f.id",
            (run_id,),
        ):
            out.setdefault(r["job_id"], {}).setdefault(r["kind"], []).append(r["text"])
        return out

    def append_event(
        self, run_id: str, job_id: int | None, event: events.Event | Mapping[str, Any]
    ) -> int:
        """Append an event (a core/model/events.py event, or its JSON form) to the run's log; returns its seq."""
        data = events.to_json(event) if is_dataclass(event) else dict(event)  # type: ignore[arg-type]
        if not isinstance(data.get("type"), str):
            raise StoreError(
                "an event needs a `type`: pass a core.model.events event or its JSON form"
            )
        blob = dumps(data, f"event {data['type']}")
        with self._write(f"append an event to run {run_id}") as db:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise UnknownRunError(run_id)
            seq = db.execute(
                "SELECT coalesce(max(seq), 0) + 1 FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            db.execute(
                "INSERT INTO events (run_id, job_id, seq, type, event, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, job_id, seq, data["type"], blob, rows.utc_now()),
            )
        return int(seq)

    def events(self, run_id: str, job_id: int | None = None) -> list[EventRow]:
        """The run's event log in order, optionally one job's events only."""
        full = self._resolve_run(run_id)
        sql = "SELECT * FROM events WHERE run_id = ?"
        params: tuple[Any, ...] = (full,)
        if job_id is not None:
            sql, params = sql + " AND job_id = ?", (full, job_id)
        return [
            EventRow(
                run_id=r["run_id"],
                job_id=r["job_id"],
                seq=r["seq"],
                type=r["type"],
                event=json.loads(r["event"]),
                created_at=r["created_at"],
            )
            for r in self._read(sql + " ORDER BY seq", params)
        ]
