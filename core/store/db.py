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

import secrets
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from core.model.paths import default_path  # the store opens it when given no path
from core.store import rows
from core.store.attempts import AttemptStore
from core.store.errors import StoreError
from core.store.jobs import JobStore
from core.store.migrations import migrate as _migrate
from core.store.rows import (
    BUSY_TIMEOUT_MS,
    EXPORT_VERSION,
    RUN_STATUSES,
    Attempt,
    Job,
    Run,
    dumps,
)


class Store(JobStore, AttemptStore):
    """A handle on one store file. Use `Store.open()`; close it, or use it as a context manager.

    Thread safety: one connection guarded by one lock. Every public method holds the lock for
    its whole transaction, so the scheduler's asyncio thread and its worker threads may share
    one Store; calls take milliseconds, so serialising them costs nothing that matters. Other
    processes are kept apart by SQLite itself (WAL, `BEGIN IMMEDIATE`, the busy timeout).
    """

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

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ----------------------------------------------------------------------------

    def create_run(self, name: str, spec: Mapping[str, Any] | None = None) -> str:
        """A new run in state `running`; returns its id, `r-YYYYMMDD-xxxx`."""
        spec_json = dumps(dict(spec or {}), "the run spec")
        now = rows.utc_now()
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
                "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?",
                (status, rows.utc_now(), full),
            )

    def resume_run(self, run_id: str) -> Run:
        """Mark a run `running` again (its pending jobs are still there: see `pending_jobs`)."""
        full = self._resolve_run(run_id)
        with self._write(f"resume run {full}") as db:
            db.execute(
                "UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?", (full,)
            )
        return self.get_run(full)

    # -- jobs ----------------------------------------------------------------------------

    # -- results -------------------------------------------------------------------------

    # -- events --------------------------------------------------------------------------

    # -- attempts ------------------------------------------------------------------------

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
