"""The store's connection: one SQLite connection behind one lock, write transactions and reads
that raise StoreError, the change listeners that live front ends hang on, and resolving a run id
(a prefix or a name) to one run."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.store import rows
from core.store.errors import StorageFault, StoreError, UnknownRunError
from core.store.rows import STALE, Run, lease_from


class StoreBase:
    """One connection guarded by one lock (see `core.store.db.Store`, which adds the queries)."""

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self._db = connection
        self._lock = threading.RLock()
        self._listeners: list[Callable[[int], None]] = []
        self._fault_listeners: list[Callable[[StorageFault], None]] = []
        self.read_only = False  # opened through SQLite's read-only mode (Store.open)
        # Runs have leases from schema 5 on; an older file (read-only, so not migrated) has none.
        self.leases = any(
            r[1] == "owner_pid" for r in connection.execute("PRAGMA table_info(runs)").fetchall()
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed when the block ends, rolled back (all of it) on any
        error. A failing disk (full, read-only, an I/O error) raises StorageFault and tells the
        fault listeners; any other SQLite error raises StoreError."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._failed(what, exc, "another process holds the store?") from None
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                if (
                    self._db.in_transaction
                ):  # SQLite may already have rolled back (a full disk, say)
                    try:
                        self._db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # nothing of the transaction is kept either way
                if isinstance(exc, sqlite3.Error):
                    raise self._failed(what, exc, "nothing of it was stored") from exc
                raise

    def _failed(self, what: str, exc: sqlite3.Error, hint: str) -> StoreError:
        fault = storage_fault(self.path, what, exc)
        if fault is None:
            return StoreError(f"cannot {what} in {self.path}: {exc} ({hint})")
        with self._lock:
            listeners = list(self._fault_listeners)
        for listener in listeners:
            try:
                listener(fault)
            except Exception:  # noqa: BLE001 - the fault is raised to the writer all the same
                pass
        return fault

    def add_fault_listener(self, listener: Callable[[StorageFault], None]) -> Callable[[], None]:
        """Call `listener(fault)` whenever a write through this handle fails for the disk's sake
        (StorageFault), in the writing thread, before the writer sees it: a run stops at its
        first one (core/orchestration/runs.py), wherever the write was. Returns its remover."""
        return self._subscribe(self._fault_listeners, listener)

    def _subscribe(self, listeners: list[Any], listener: Any) -> Callable[[], None]:
        with self._lock:
            listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in listeners:
                    listeners.remove(listener)

        return remove

    @staticmethod
    def _existing_id(db: sqlite3.Connection, table: str, run_id: str, key: str) -> Any:
        """The id of the row of `table` (jobs, attempts) the run already has under `key`, or
        None: adding either is idempotent on its key."""
        row = db.execute(f"SELECT id FROM {table} WHERE run_id = ? AND key = ?", (run_id, key))
        found = row.fetchone()
        return None if found is None else found[0]

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
        return self._subscribe(self._listeners, listener)

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
        found = self._read(
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
        out = []
        for r in found:
            lease = lease_from(r) if self.leases else None
            status = r["status"]
            if status == "running" and lease is not None and not lease.live(rows.STALE_AFTER_S):
                status = STALE  # its process is gone: nobody runs it, and it resumes
            out.append(self._run_row(r, status, lease, states, statuses))
        return out

    @staticmethod
    def _run_row(
        r: sqlite3.Row,
        status: str,
        lease: Any,
        states: dict[str, dict[str, int]],
        statuses: dict[str, dict[str, int]],
    ) -> Run:
        return Run(
            id=r["id"],
            name=r["name"],
            created_at=r["created_at"],
            finished_at=r["finished_at"],
            status=status,
            spec=json.loads(r["spec"]),
            job_states=states.get(r["id"], {}),
            result_statuses=statuses.get(r["id"], {}),
            lease=lease,
        )


# SQLite's primary result codes for a disk that fails a write (sqlite3.Error.sqlite_errorcode
# carries the extended code; its low byte is the primary one).
SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN = 3, 8, 10, 13, 14


def storage_fault(path: Path, what: str, exc: sqlite3.Error) -> StorageFault | None:
    """The StorageFault that `exc` is (one line: what failed, why in words, what to do), or None
    when the disk is not to blame."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc)
    if primary in (SQLITE_CANTOPEN, SQLITE_IOERR, SQLITE_PERM) and _read_only_fs(path):
        primary = SQLITE_READONLY  # SQLite could not make its files there: say why
    if primary == SQLITE_FULL or "disk is full" in text:
        why = "the disk is full"
        fix = "free space on it (or use a store on another disk: --db PATH)"
    elif primary == SQLITE_READONLY or "readonly" in text:
        why = "the store is read-only" + (" (its file system is)" if _read_only_fs(path) else "")
        fix = (
            "make the file and its folder writable (or use another store: --db PATH); "
            "reading it still works (`arena runs list`, `arena leaderboard`)"
        )
    elif primary in (SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PERM) or "disk I/O error" in text:
        why = "the disk failed the write"
        fix = "check that it is not full, read-only or failing"
    else:
        return None
    return StorageFault(
        f"cannot {what} in {path}: {why} ({text}); nothing of it was stored. Fix: {fix}"
    )


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False
