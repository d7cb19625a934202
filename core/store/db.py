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

from core.model.owner import Owner
from core.model.paths import default_path  # the store opens it when given no path
from core.store import rows
from core.store.attempts import AttemptStore
from core.store.base import storage_fault
from core.store.errors import StorageFault, StoreError
from core.store.jobs import JobStore
from core.store.leases import LeaseStore
from core.store.migrations import MIGRATIONS, READABLE_FROM
from core.store.migrations import migrate as _migrate
from core.store.rows import (
    BUSY_TIMEOUT_MS,
    EXPORT_VERSION,
    RUN_STATUSES,
    STALE,
    Attempt,
    Job,
    Run,
    dumps,
)

HINT = "pass --db PATH or set ARENA_DB to use another file"


class Store(JobStore, AttemptStore, LeaseStore):
    """A handle on one store file. Use `Store.open()`; close it, or use it as a context manager.

    Thread safety: one connection guarded by one lock. Every public method holds the lock for
    its whole transaction, so the scheduler's asyncio thread and its worker threads may share
    one Store; calls take milliseconds, so serialising them costs nothing that matters. Other
    processes are kept apart by SQLite itself (WAL, `BEGIN IMMEDIATE`, the busy timeout).
    """

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path | None = None, *, mode: str = "rw") -> Store:
        """Open the store at `path`, default `default_path()`. `mode`:

        - `rw` (writers): create it if needed and migrate it;
        - `ro`: SQLite's read-only mode; the file must exist and is never changed;
        - `auto` (readers: `arena runs`, `arena leaderboard`): as `rw`, and where the store
          cannot be written (a read-only file system, a file that is not ours) as `ro`.
        """
        path = Path(path).expanduser() if path is not None else default_path()
        if mode == "ro":
            return cls._open_read_only(path)
        try:
            return cls._open_writable(path)
        except StorageFault:
            if mode != "auto":
                raise
            return cls._open_read_only(path)

    @classmethod
    def _open_writable(cls, path: Path) -> Store:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder of the results store {path}: {exc.strerror or exc}; {HINT}"
            ) from None
        if path.is_dir():
            raise StoreError(f"the results store {path} is a folder: {HINT}")
        try:
            # isolation_level=None: no implicit transactions; every write below says BEGIN itself.
            db = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            db.row_factory = sqlite3.Row
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the results store {path}: {exc}; {HINT}") from None
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"the results store {path} cannot use WAL mode (got {mode}): put it on a local file system; {HINT}"
                )
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            _migrate(db, path)
        except sqlite3.DatabaseError as exc:
            db.close()
            fault = storage_fault(path, "open the results store", exc)
            if fault is not None:  # the disk, not the file: full, read-only, failing
                raise fault from None
            raise StoreError(
                f"cannot use the results store {path}: {exc}; is it an arena database? {HINT}"
            ) from None
        except BaseException:
            db.close()
            raise
        return cls(path, db)

    @classmethod
    def _open_read_only(cls, path: Path) -> Store:
        """Through SQLite's read-only mode: `mode=ro`, else (a WAL file on a read-only file
        system, where SQLite cannot make the shared-memory file) `immutable=1`, which is safe
        there because nothing can write it. Writes raise StorageFault (read-only)."""
        if not path.is_file():
            raise StoreError(f"there is no results store at {path}: {HINT}")
        last: sqlite3.Error | None = None
        for query in ("mode=ro", "mode=ro&immutable=1"):
            try:
                db = sqlite3.connect(
                    f"{path.resolve().as_uri()}?{query}",
                    uri=True,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
                db.row_factory = sqlite3.Row
                version = db.execute("PRAGMA user_version").fetchone()[0]
                db.execute("SELECT count(*) FROM runs").fetchone()
            except sqlite3.Error as exc:
                last = exc
                if storage_fault(path, "read", exc) is None:
                    break  # not the disk: no fallback reads it either
                continue  # no shared-memory file on a read-only file system: immutable
            if version > len(MIGRATIONS) or version < READABLE_FROM:
                db.close()
                raise StoreError(
                    f"the results store {path} is read-only and at schema {version}, which this arena cannot read "
                    f"without migrating it: open it once where it is writable (any `arena run`), or upgrade kernel-arena"
                )
            store = cls(path, db)
            store.read_only = True
            return store
        raise StoreError(
            f"cannot read the results store {path} even in read-only mode: {last}; is it an arena database? {HINT}"
        )

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ----------------------------------------------------------------------------

    def create_run(
        self, name: str, spec: Mapping[str, Any] | None = None, owner: Owner | None = None
    ) -> str:
        """A new run in state `running`, its lease held by `owner` (default: this process:
        core/store/leases.py); returns its id, `r-YYYYMMDD-xxxx`."""
        owner = owner or Owner.me()
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
            if self.leases:
                self._claim(db, run_id, owner)
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
        lease = (
            ", owner_pid = NULL, owner_host = NULL, owner_token = NULL, heartbeat_at = NULL"
            if self.leases
            else ""
        )
        with self._write(f"finish run {full}") as db:  # and let its lease go
            db.execute(
                f"UPDATE runs SET status = ?, finished_at = ?{lease} WHERE id = ?",
                (status, rows.utc_now(), full),
            )

    def resume_run(self, run_id: str, owner: Owner | None = None) -> Run:
        """Mark a run `running` again, its lease held by `owner` (default: this process); its
        pending jobs are still there (see `pending_jobs`). A run whose owner is alive is not
        resumed: RunOwnedError names that process."""
        full = self._resolve_run(run_id)
        with self._write(f"resume run {full}") as db:
            if self.leases:
                self._claim(db, full, owner or Owner.me())
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
                ("seed",) if run.status in ("running", STALE) else ()
            )  # the seed is a secret until the run is over
            yield {
                "type": "job",
                **{f.name: getattr(job, f.name) for f in fields(Job) if f.name not in secret},
                "result": row.result if row else None,
            }
        for attempt in self.attempts(run.id):
            yield {"type": "attempt", **{f.name: getattr(attempt, f.name) for f in fields(Attempt)}}
