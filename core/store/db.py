"""The SQLite results store, the embedded default: runs, their jobs, results, flags and events.

The store lives at `$ARENA_DB`, else `${XDG_DATA_HOME:-~/.local/share}/kernel-arena/arena.db`.
Several processes may open it at once (the arena, `arena check` from an agent's workspace,
`arena runs`): it runs in WAL mode with a busy timeout, and every write is one short
transaction. A result is committed before `record_result` returns, so a front end that shows
it after the call never shows a result the store has not kept.

The schema is a list of migrations (`core.store.migrations.MIGRATIONS`), each applied in its own transaction and
counted in `PRAGMA user_version`; a database newer than this code is refused. Every JSON blob
(a run's spec, a result, an event) sits beside the columns that queries need.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.model import events
from core.model.paths import default_path  # the store opens it when given no path
from core.model.result import Result, StageResult, WorkloadFigures
from core.store.errors import StoreError
from core.store.migrations import migrate as _migrate

RUN_STATUSES = ("running", "finished", "interrupted", "cancelled")
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


class UnknownRunError(StoreError, LookupError):
    """A run id (or prefix of one) that no run in the store has."""

    def __init__(self, run_id: str):
        super().__init__(f"unknown run `{run_id}`: see `arena runs list`")
        self.run_id = run_id


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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"{what} is not JSON-ready ({exc}): pass plain dicts, lists, strings and numbers"
        ) from None


class Store:
    """A handle on one store file. Use `Store.open()`; close it, or use it as a context manager.

    Thread safety: one connection guarded by one lock. Every public method holds the lock for
    its whole transaction, so the scheduler's asyncio thread and its worker threads may share
    one Store; calls take milliseconds, so serialising them costs nothing that matters. Other
    processes are kept apart by SQLite itself (WAL, `BEGIN IMMEDIATE`, the busy timeout).
    """

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self._db = connection
        self._lock = threading.RLock()
        self._listeners: list[Callable[[int], None]] = []

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path | None = None) -> Store:
        """Open (creating if needed) the store at `path`, default `default_path()`, and migrate it."""
        path = Path(path).expanduser() if path is not None else default_path()
        hint = "pass --db PATH or set ARENA_DB to use another file"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder of the results store {path}: {exc.strerror or exc}; {hint}"
            ) from None
        if path.is_dir():
            raise StoreError(f"the results store {path} is a folder: {hint}")
        try:
            # isolation_level=None: no implicit transactions; every write below says BEGIN itself.
            db = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            db.row_factory = sqlite3.Row
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the results store {path}: {exc}; {hint}") from None
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"the results store {path} cannot use WAL mode (got {mode}): put it on a local file system; {hint}"
                )
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            _migrate(db, path)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(
                f"cannot use the results store {path}: {exc}; is it an arena database? {hint}"
            ) from None
        except BaseException:
            db.close()
            raise
        return cls(path, db)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed when the block ends, rolled back (all of it) on any error."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(
                    f"cannot {what} in {self.path}: {exc} (another process holds the store?)"
                ) from None
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                if (
                    self._db.in_transaction
                ):  # SQLite may already have rolled back (a full disk, say)
                    self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(
                        f"cannot {what} in {self.path}: {exc}; nothing of it was stored"
                    ) from exc
                raise

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read {self.path}: {exc}") from None

    # -- change notification -------------------------------------------------------------
    # Front ends that show results live (the leaderboard page's event stream) learn of a write
    # two ways: a listener hears this handle's own writes at once; `data_version` changes when
    # any other connection (another process) commits, and `recorded_since` says what landed.

    def add_listener(self, listener: Callable[[int], None]) -> Callable[[], None]:
        """Call `listener(job_id)` after each committed write through this handle that changes a
        result (`record_result`, `mark_infrastructure`), in the writing thread. It must be quick
        and must not raise (what it raises is ignored: the write is already kept). Returns a
        function that removes it."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def _notify(self, job_id: int) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(job_id)
            except Exception:  # noqa: BLE001 - a front end's bug must not fail a committed write
                pass

    @property
    def data_version(self) -> int:
        """SQLite's `PRAGMA data_version`: it changes whenever another connection commits
        (this handle's own writes leave it: listen for those). Cheap enough to poll."""
        with self._lock:
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def recorded_since(self, stamp: str | None = None) -> list[dict[str, Any]]:
        """Results recorded (or recorded again) at or after `stamp` (a `created_at` value; None:
        every one), oldest first: run_id, job_id, task_id, created_at and the board columns.
        A caller tailing the store keeps the last `created_at` it saw and passes it back."""
        rows = self._read(
            "SELECT j.run_id, r.job_id, j.task_id, j.family, j.agent, r.status, r.timing_kind, r.speedup, r.sol_fraction,"
            " r.device_id, r.device_model, r.device_vendor, r.created_at FROM results r JOIN jobs j ON j.id = r.job_id"
            " WHERE r.created_at >= ? ORDER BY r.created_at, r.job_id",
            (stamp or "",),
        )
        return [dict(r) for r in rows]

    # -- runs ----------------------------------------------------------------------------

    def create_run(self, name: str, spec: Mapping[str, Any] | None = None) -> str:
        """A new run in state `running`; returns its id, `r-YYYYMMDD-xxxx`."""
        spec_json = _dumps(dict(spec or {}), "the run spec")
        now = _now()
        day = now[:10].replace("-", "")
        with self._write("create a run") as db:
            for _ in range(100):
                run_id = f"r-{day}-{secrets.token_hex(2)}"
                if db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                    break
            else:  # 100 collisions in a row: ~65 000 runs today
                run_id = f"r-{day}-{secrets.token_hex(4)}"
            db.execute(
                "INSERT INTO runs (id, name, created_at, status, spec) VALUES (?, ?, ?, 'running', ?)",
                (run_id, name, now, spec_json),
            )
        return run_id

    def get_run(self, run_id: str) -> Run:
        """The run with this id, a unique prefix of it (`r-` may be left out) or a unique ending."""
        return self._runs(self._resolve_run(run_id))[0]

    def list_runs(self) -> list[Run]:
        """Every run, newest first, with its jobs counted by state and its results by status."""
        return self._runs(None)

    def finish_run(self, run_id: str, status: str = "finished") -> None:
        if status not in RUN_STATUSES[1:]:
            raise StoreError(
                f"a run finishes as one of {', '.join(RUN_STATUSES[1:])}, not `{status}`"
            )
        full = self._resolve_run(run_id)
        with self._write(f"finish run {full}") as db:
            db.execute(
                "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, _now(), full)
            )

    def resume_run(self, run_id: str) -> Run:
        """Mark a run `running` again (its pending jobs are still there: see `pending_jobs`)."""
        full = self._resolve_run(run_id)
        with self._write(f"resume run {full}") as db:
            db.execute(
                "UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?", (full,)
            )
        return self.get_run(full)

    def _resolve_run(self, run_id: str) -> str:
        """The full id of the run that `run_id` names: the id itself, a unique prefix of it (with or
        without `r-`), or failing those a unique ending of 4 or more characters (`0a8f`)."""
        if not run_id:
            raise UnknownRunError(run_id)
        candidates = [("prefix", run_id)] + (
            [("prefix", f"r-{run_id}")] if not run_id.startswith("r-") else []
        )
        if len(run_id) >= 4:
            candidates.append(("ending", run_id))
        for how, part in candidates:
            where = "substr(id, 1, ?) = ?" if how == "prefix" else "substr(id, -?) = ?"
            ids = [
                r["id"]
                for r in self._read(
                    f"SELECT id FROM runs WHERE {where} ORDER BY id LIMIT 6", (len(part), part)
                )
            ]
            if run_id in ids:
                return run_id
            if len(ids) == 1:
                return ids[0]
            if ids:
                more = ", ..." if len(ids) > 5 else ""
                raise StoreError(
                    f"run `{run_id}` is ambiguous: it names {', '.join(ids[:5])}{more}; give more of the id"
                )
        raise UnknownRunError(run_id)

    def _runs(self, run_id: str | None) -> list[Run]:
        only = "WHERE j.run_id = ?" if run_id else ""
        params = (run_id,) if run_id else ()
        rows = self._read(
            f"SELECT * FROM runs {'WHERE id = ?' if run_id else ''} ORDER BY created_at DESC, rowid DESC",
            params,
        )
        states: dict[str, dict[str, int]] = {}
        for r in self._read(
            f"SELECT j.run_id, j.state, count(*) AS n FROM jobs j {only} GROUP BY j.run_id, j.state",
            params,
        ):
            states.setdefault(r["run_id"], {})[r["state"]] = r["n"]
        statuses: dict[str, dict[str, int]] = {}
        for r in self._read(
            f"SELECT j.run_id, r.status, count(*) AS n FROM results r JOIN jobs j ON j.id = r.job_id {only} GROUP BY j.run_id, r.status",
            params,
        ):
            statuses.setdefault(r["run_id"], {})[r["status"]] = r["n"]
        return [
            Run(
                id=r["id"],
                name=r["name"],
                created_at=r["created_at"],
                finished_at=r["finished_at"],
                status=r["status"],
                spec=json.loads(r["spec"]),
                job_states=states.get(r["id"], {}),
                result_statuses=statuses.get(r["id"], {}),
            )
            for r in rows
        ]

    # -- jobs ----------------------------------------------------------------------------

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
        now = _now()
        with self._write(f"add a job to run {full}") as db:
            existing = db.execute(
                "SELECT id FROM jobs WHERE run_id = ? AND key = ?", (full, key)
            ).fetchone()
            if existing is not None:
                return int(existing[0])
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
        return _job(rows[0])

    def set_job_state(self, job_id: int, state: str, attempts: int | None = None) -> None:
        if state not in JOB_STATES:
            raise StoreError(f"job state `{state}` is not one of {', '.join(JOB_STATES)}")
        with self._write(f"update job {job_id}") as db:
            cursor = db.execute(
                "UPDATE jobs SET state = ?, attempts = coalesce(?, attempts), updated_at = ? WHERE id = ?",
                (state, attempts, _now(), job_id),
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
                "UPDATE jobs SET seed = ?, updated_at = ? WHERE id = ?", (seed, _now(), job_id)
            )
            return seed

    def jobs(self, run_id: str, state: str | None = None) -> list[Job]:
        """The run's jobs in the order they were added, optionally only those in `state`."""
        full = self._resolve_run(run_id)
        if state is not None and state not in JOB_STATES:
            raise StoreError(f"job state `{state}` is not one of {', '.join(JOB_STATES)}")
        sql, params = "SELECT * FROM jobs WHERE run_id = ?", (full,)
        if state is not None:
            sql, params = sql + " AND state = ?", (full, state)
        return [_job(r) for r in self._read(sql + " ORDER BY id", params)]

    def pending_jobs(self, run_id: str) -> list[Job]:
        """Jobs still to do: queued ones, and running ones (the run was interrupted under them),
        highest priority first, then in the order they were added."""
        full = self._resolve_run(run_id)
        rows = self._read(
            "SELECT * FROM jobs WHERE run_id = ? AND state IN ('queued', 'running') ORDER BY priority DESC, id",
            (full,),
        )
        return [_job(r) for r in rows]

    # -- results -------------------------------------------------------------------------

    def record_result(self, job_id: int, result: Result) -> None:
        """Write the result, its flags and the job's new state in one transaction; returns once
        committed. The job becomes `done` when the evaluation reached a verdict (passed or failed),
        `failed` on an infrastructure error. Recording a job again replaces its result and flags."""
        data = result.to_json()
        blob = _dumps(data, f"the result of job {job_id}")
        device = result.device or {}
        state = "failed" if result.status == "infrastructure_error" else "done"
        now = _now()
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
        return [_result_row(r, flags.get(r["job_id"], {})) for r in rows]

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

    # -- events --------------------------------------------------------------------------

    def append_event(
        self, run_id: str, job_id: int | None, event: events.Event | Mapping[str, Any]
    ) -> int:
        """Append an event (a core/model/events.py event, or its JSON form) to the run's log; returns its seq."""
        data = events.to_json(event) if is_dataclass(event) else dict(event)  # type: ignore[arg-type]
        if not isinstance(data.get("type"), str):
            raise StoreError(
                "an event needs a `type`: pass a core.model.events event or its JSON form"
            )
        blob = _dumps(data, f"event {data['type']}")
        with self._write(f"append an event to run {run_id}") as db:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise UnknownRunError(run_id)
            seq = db.execute(
                "SELECT coalesce(max(seq), 0) + 1 FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            db.execute(
                "INSERT INTO events (run_id, job_id, seq, type, event, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, job_id, seq, data["type"], blob, _now()),
            )
        return int(seq)

    def events(self, run_id: str, job_id: int | None = None) -> list[EventRow]:
        """The run's event log in order, optionally one job's events only."""
        full = self._resolve_run(run_id)
        sql, params = "SELECT * FROM events WHERE run_id = ?", (full,)
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

    # -- attempts ------------------------------------------------------------------------

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
        now = _now()
        with self._write(f"add an attempt to run {full}") as db:
            existing = db.execute(
                "SELECT id FROM attempts WHERE run_id = ? AND key = ?", (full, key)
            ).fetchone()
            if existing is not None:
                return str(existing[0])
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
        return [_attempt(r) for r in rows]

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
        return _attempt(rows[0])

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
                (str(folder), _now(), _now(), attempt_id),
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
                    _now(),
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
        finished = _now() if state in ("done", "failed", "cancelled") else None
        with self._write(f"update attempt {attempt_id}") as db:
            cursor = db.execute(
                "UPDATE attempts SET state = ?, stop_reason = coalesce(?, stop_reason), job_id = coalesce(?, job_id), error = coalesce(?, error),"
                " finished_at = ?, updated_at = ? WHERE id = ?",
                (state, stop_reason, job_id, error, finished, _now(), attempt_id),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"unknown attempt {attempt_id}: add it with add_attempt first")

    def append_transcript(self, event: events.TranscriptEvent) -> None:
        blob = _dumps(events.to_json(event), f"transcript event {event.seq} of {event.attempt}")
        with self._write(f"append to the transcript of {event.attempt}") as db:
            db.execute(
                "INSERT OR REPLACE INTO transcripts (attempt_id, seq, kind, event, created_at) VALUES (?, ?, ?, ?, ?)",
                (event.attempt, event.seq, event.kind, blob, _now()),
            )

    def transcript(self, attempt_id: str) -> list[events.TranscriptEvent]:
        """The attempt's transcript in order (`attempt_id` as `get_attempt` takes it)."""
        full = self.get_attempt(attempt_id).id
        rows = self._read(
            "SELECT event FROM transcripts WHERE attempt_id = ? ORDER BY seq", (full,)
        )
        return [events.parse(r["event"]) for r in rows]  # type: ignore[misc]

    # -- export --------------------------------------------------------------------------

    def export_run(self, run_id: str) -> Iterator[dict[str, Any]]:
        """One JSON-ready dict per line: the run header, then each job with its result (or null)."""
        run = self.get_run(run_id)
        yield {
            "type": "run",
            "export_version": EXPORT_VERSION,
            "store_schema": self.schema_version,
            "id": run.id,
            "name": run.name,
            "created_at": run.created_at,
            "finished_at": run.finished_at,
            "status": run.status,
            "spec": run.spec,
            "job_states": run.job_states,
        }
        results = {r.job_id: r for r in self.results(run.id)}
        for job in self.jobs(run.id):
            row = results.get(job.id)
            secret = (
                ("seed",) if run.status == "running" else ()
            )  # the seed is a secret until the run is over
            yield {
                "type": "job",
                **{f.name: getattr(job, f.name) for f in fields(Job) if f.name not in secret},
                "result": row.result if row else None,
            }
        for attempt in self.attempts(run.id):
            yield {"type": "attempt", **{f.name: getattr(attempt, f.name) for f in fields(Attempt)}}


def _attempt(r: sqlite3.Row) -> Attempt:
    return Attempt(**{f.name: r[f.name] for f in fields(Attempt)})


def _job(r: sqlite3.Row) -> Job:
    return Job(**{f.name: r[f.name] for f in fields(Job)})


def _result_row(r: sqlite3.Row, flags: dict[str, list[str]]) -> ResultRow:
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
