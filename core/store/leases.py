"""One owner per run: the process that executes a run holds its lease in the store (process id,
host, start token, heartbeat), so that a second process cannot run it at the same time and a
run whose process died is told apart from a live one.

- `create_run` and `resume_run` take the lease for the calling process, in the same transaction
  that marks the run `running`; `resume_run` of a run whose owner lives raises RunOwnedError,
  which names the owner. `finish_run` lets it go.
- The owner renews it (`heartbeat`) every `rows.HEARTBEAT_S` (core/orchestration/lease.py does this for
  `execute` and for `arena serve`'s run). A heartbeat that finds the lease taken over returns False.
- A run is live while its owner is: checked directly on this host (the process id and its start
  time: a reused id is not the owner), judged by the heartbeat on another (older than
  `rows.STALE_AFTER_S`: gone). A `running` run whose owner is gone is shown `stale` (`Run.status`) and
  resumes like an interrupted one."""

from __future__ import annotations

import sqlite3

from core.model.owner import Owner
from core.store import rows
from core.store.base import StoreBase
from core.store.errors import RunOwnedError, UnknownRunError
from core.store.rows import Lease, lease_from


def refusal(run_id: str, lease: Lease) -> RunOwnedError:
    return RunOwnedError(
        f"run {run_id} is being executed by {lease.describe()}: wait for it to end, or stop it "
        f"(on {lease.owner.host}: kill {lease.owner.pid}) and resume it then"
    )


class LeaseStore(StoreBase):
    """The runs' leases (mixed into `core.store.db.Store`)."""

    def lease(self, run_id: str) -> Lease | None:
        """Who holds the run's lease (None: no one, e.g. a finished run)."""
        full = self._resolve_run(run_id)
        if not self.leases:
            return None
        found = self._read(
            "SELECT owner_pid, owner_host, owner_token, heartbeat_at FROM runs WHERE id = ?",
            (full,),
        )
        return lease_from(found[0]) if found else None

    def check_lease(self, run_id: str, owner: Owner | None = None) -> None:
        """Raise RunOwnedError when a live process other than `owner` (default: this one)
        holds the run's lease; a read, for refusing early (before a preflight)."""
        lease = self.lease(run_id)
        if lease is not None and lease.owner != (owner or Owner.me()):
            if lease.live(rows.STALE_AFTER_S):
                raise refusal(self._resolve_run(run_id), lease)

    def take_lease(self, run_id: str, owner: Owner | None = None) -> None:
        """Hold the run's lease for `owner` (default: this process), unless another live
        process holds it (RunOwnedError, nothing changed). Taking one's own lease renews it."""
        owner = owner or Owner.me()
        full = self._resolve_run(run_id)
        if not self.leases:
            return
        with self._write(f"take the lease of run {full}") as db:
            self._claim(db, full, owner)

    def heartbeat(self, run_id: str, owner: Owner | None = None) -> bool:
        """Renew the lease; False when `owner` (default: this process) no longer holds it."""
        owner = owner or Owner.me()
        if not self.leases:
            return True
        with self._write(f"renew the lease of run {run_id}") as db:
            cursor = db.execute(
                "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND owner_pid = ? AND owner_host = ? AND owner_token = ?",
                (rows.utc_now(), run_id, owner.pid, owner.host, owner.token),
            )
            return cursor.rowcount == 1

    def _claim(self, db: sqlite3.Connection, run_id: str, owner: Owner) -> None:
        """Inside a write transaction: refuse if another live owner holds the lease, else take it."""
        row = db.execute(
            "SELECT owner_pid, owner_host, owner_token, heartbeat_at FROM runs WHERE id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise UnknownRunError(run_id)
        lease = lease_from(row)
        if lease is not None and lease.owner != owner and lease.live(rows.STALE_AFTER_S):
            raise refusal(run_id, lease)
        db.execute(
            "UPDATE runs SET owner_pid = ?, owner_host = ?, owner_token = ?, heartbeat_at = ? WHERE id = ?",
            (owner.pid, owner.host, owner.token, rows.utc_now(), run_id),
        )
