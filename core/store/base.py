"""The store's connection: one SQLite connection behind one lock, write transactions and reads
that raise StoreError, the change listeners that live front ends hang on, and resolving a run id
(a prefix or a name) to one run."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.store.errors import StoreError, UnknownRunError
from core.store.rows import Run


class StoreBase:
    """One connection guarded by one lock (see `core.store.db.Store`, which adds the queries)."""

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self._db = connection
        self._lock = threading.RLock()
        self._listeners: list[Callable[[int], None]] = []

    def close(self) -> None:
        with self._lock:
            self._db.close()

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
