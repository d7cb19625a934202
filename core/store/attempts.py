"""The store's agent attempts and their transcripts: an attempt is queued, started in its
workspace folder, ended with the agent's outcome; its transcript events are appended as they come."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.model import events
from core.store import rows
from core.store.base import StoreBase
from core.store.errors import StoreError
from core.store.rows import ATTEMPT_STATES, Attempt, attempt_from, dumps


class AttemptStore(StoreBase):
    """Attempts and transcripts of a run (mixed into `core.store.db.Store`)."""

    def add_attempt(
        self,
        run_id: str,
        index: int,
        *,
        key: str,
        agent: str,
        agent_kind: str,
        model: str | None,
        task_id: str,
        device_id: str,
        variant: str,
        iteration: int = 0,
        family: str | None = None,
    ) -> str:
        """Queue an attempt; returns its id, `<run id>/<index>`. Idempotent on `key`: an attempt
        the run already has keeps its id and state."""
        full = self._resolve_run(run_id)
        now = rows.utc_now()
        with self._write(f"add an attempt to run {full}") as db:
            existing = self._existing_id(db, "attempts", full, key)
            if existing is not None:
                return str(existing)
            attempt_id = f"{full}/{index}"
            db.execute(
                "INSERT INTO attempts (id, run_id, key, agent, agent_kind, model, task_id, family, device_id, variant, iteration, state,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
                (
                    attempt_id,
                    full,
                    key,
                    agent,
                    agent_kind,
                    model,
                    task_id,
                    family or task_id.split("/")[0],
                    device_id,
                    variant,
                    iteration,
                    now,
                    now,
                ),
            )
            return attempt_id

    def attempts(self, run_id: str) -> list[Attempt]:
        """The run's attempts in plan order."""
        full = self._resolve_run(run_id)
        rows = self._read(
            "SELECT * FROM attempts WHERE run_id = ? ORDER BY CAST(substr(id, length(run_id) + 2) AS INTEGER)",
            (full,),
        )
        return [attempt_from(r) for r in rows]

    def get_attempt(self, attempt_id: str) -> Attempt:
        """An attempt by its id, `<run>/<n>`, where the run part may be any form `get_run` takes."""
        run_part, _, index = attempt_id.rpartition("/")
        if not run_part or not index.isdigit():
            raise StoreError(
                f"`{attempt_id}` is not an attempt id: give RUN/N, e.g. r-20261129-1c4b/3 (see `arena runs show RUN`)"
            )
        full = f"{self._resolve_run(run_part)}/{int(index)}"
        rows = self._read("SELECT * FROM attempts WHERE id = ?", (full,))
        if not rows:
            raise StoreError(
                f"unknown attempt `{attempt_id}`: see `arena runs show {run_part}` for the run's attempts"
            )
        return attempt_from(rows[0])

    def start_attempt(self, attempt_id: str, folder: str | Path) -> None:
        """Mark an attempt running from scratch: a rerun (after an interruption) forgets the
        transcript and figures of the try it replaces."""
        with self._write(f"start attempt {attempt_id}") as db:
            db.execute("DELETE FROM transcripts WHERE attempt_id = ?", (attempt_id,))
            db.execute(
                "UPDATE attempts SET state = 'running', stop_reason = NULL, exit_status = NULL, job_id = NULL, folder = ?, submission = NULL,"
                " checks = 0, input_tokens = NULL, output_tokens = NULL, cost_usd = NULL, seconds = NULL, sandbox = NULL, error = NULL,"
                " outcome = NULL, outcome_reason = NULL,"
                " started_at = ?, finished_at = NULL, updated_at = ? WHERE id = ?",
                (str(folder), rows.utc_now(), rows.utc_now(), attempt_id),
            )

    def end_agent(
        self,
        attempt_id: str,
        *,
        stop_reason: str,
        exit_status: int | None,
        submission: str | Path,
        checks: int,
        seconds: float,
        usage: Mapping[str, Any],
        sandbox: str | None = None,
        error: str | None = None,
        outcome: str | None = None,
        outcome_reason: str | None = None,
    ) -> None:
        """The agent has stopped and its solution is snapshotted: the attempt is `evaluating`.
        `outcome`: what the agent phase amounted to (core/model/outcome.py)."""
        with self._write(f"end the agent of attempt {attempt_id}") as db:
            db.execute(
                "UPDATE attempts SET state = 'evaluating', stop_reason = ?, exit_status = ?, submission = ?, checks = ?, seconds = ?,"
                " input_tokens = ?, output_tokens = ?, cost_usd = ?, sandbox = ?, error = ?, outcome = ?, outcome_reason = ?,"
                " updated_at = ? WHERE id = ?",
                (
                    stop_reason,
                    exit_status,
                    str(submission),
                    checks,
                    seconds,
                    usage.get("input_tokens"),
                    usage.get("output_tokens"),
                    usage.get("cost_usd"),
                    sandbox,
                    error,
                    outcome,
                    outcome_reason,
                    rows.utc_now(),
                    attempt_id,
                ),
            )

    def set_attempt_state(
        self,
        attempt_id: str,
        state: str,
        *,
        stop_reason: str | None = None,
        job_id: int | None = None,
        error: str | None = None,
    ) -> None:
        if state not in ATTEMPT_STATES:
            raise StoreError(f"attempt state `{state}` is not one of {', '.join(ATTEMPT_STATES)}")
        finished = rows.utc_now() if state in ("done", "failed", "cancelled") else None
        with self._write(f"update attempt {attempt_id}") as db:
            cursor = db.execute(
                "UPDATE attempts SET state = ?, stop_reason = coalesce(?, stop_reason), job_id = coalesce(?, job_id), error = coalesce(?, error),"
                " finished_at = ?, updated_at = ? WHERE id = ?",
                (state, stop_reason, job_id, error, finished, rows.utc_now(), attempt_id),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"unknown attempt {attempt_id}: add it with add_attempt first")

    def append_transcript(self, event: events.TranscriptEvent) -> None:
        blob = dumps(events.to_json(event), f"transcript event {event.seq} of {event.attempt}")
        with self._write(f"append to the transcript of {event.attempt}") as db:
            db.execute(
                "INSERT OR REPLACE INTO transcripts (attempt_id, seq, kind, event, created_at) VALUES (?, ?, ?, ?, ?)",
                (event.attempt, event.seq, event.kind, blob, rows.utc_now()),
            )

    def transcript(self, attempt_id: str) -> list[events.TranscriptEvent]:
        """The attempt's transcript in order (`attempt_id` as `get_attempt` takes it)."""
        full = self.get_attempt(attempt_id).id
        rows = self._read(
            "SELECT event FROM transcripts WHERE attempt_id = ? ORDER BY seq", (full,)
        )
        return [events.parse(r["event"]) for r in rows]  # type: ignore[misc]
