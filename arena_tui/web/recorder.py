"""What `arena serve` keeps in the results store: its full evaluations, so that they reach the
leaderboard, and the ones a shutdown cut short, so that nothing is silently lost.

One run per server (named `serve`, created at its first evaluation). A full evaluation is an
`/evaluate` that is not `visible_only`, or an episode's final evaluation; visible-only turns
are an agent's drafts and are not kept. Each gets a job when it starts (state `running`), its
result when it ends, or state `cancelled` when the shutdown cancelled it. The candidate's
source is kept beside the store (`candidates/<sha256>.py`, content-addressed) and the job
points at it, so the leaderboard page can show what was scored.

The server's run is leased to this process like any run (core/store/leases.py), so a killed
server's run shows `stale` and the next server marks it `interrupted`. A store that cannot be
written (a full disk, a read-only file) refuses the evaluation: before it runs when its job
cannot be added, after it when its result cannot be kept; either is a 503 that says so, never
an answer whose result the store does not have."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
from pathlib import Path
from typing import Any

from arena_tui.web.errors import HttpError
from core.model.result import Result
from core.orchestration.lease import keep_lease
from core.store.db import Store
from core.store.errors import StorageFault, StoreError


class Recorder:
    def __init__(self, store: Store, spec: dict[str, Any]):
        self.store, self.spec = store, spec
        self.run_id: str | None = None
        self.candidates = store.path.parent / "candidates"
        self.cancelled = 0
        self._count = itertools.count(1)
        self._lock = asyncio.Lock()
        self._keeper: asyncio.Task[None] | None = None

    async def start(
        self, task_id: str, device_id: str, source: str, agent: str | None, variant: str
    ) -> int:
        """A job in state `running` for an evaluation that is starting; returns its id. A store
        that cannot be written refuses it (HttpError 503) before anything runs."""
        try:
            async with self._lock:  # one run, created once (its lease: this process)
                if self.run_id is None:
                    self.run_id = await asyncio.to_thread(self.store.create_run, "serve", self.spec)
                    self._keeper = asyncio.ensure_future(
                        keep_lease(self.store, self.run_id, lambda exc: None)
                    )
            path = await asyncio.to_thread(self._keep_source, source)
            job_id = await asyncio.to_thread(
                self.store.add_job,
                self.run_id,
                task_id=task_id,
                device_id=device_id,
                candidate=path,
                agent=agent or "serve",
                variant=variant,
                key=f"serve|{next(self._count)}",
            )
            await asyncio.to_thread(self.store.set_job_state, job_id, "running")
        except (StorageFault, OSError) as exc:
            raise refusal("this evaluation was not run", exc) from None
        return job_id

    async def finish(self, job_id: int, result: Result) -> None:
        try:
            await asyncio.to_thread(self.store.record_result, job_id, result)
        except StorageFault as exc:
            raise refusal("this evaluation ran, but its result could not be kept", exc) from None

    async def cancel(self, job_id: int) -> None:
        self.cancelled += 1
        try:
            await asyncio.to_thread(self.store.set_job_state, job_id, "cancelled")
        except StoreError:
            pass  # a full disk: the job stays `running`, and the next server retires the run

    async def close(self) -> None:
        """Finish the server's run: `interrupted` when the shutdown cancelled evaluations."""
        if self._keeper is not None:
            self._keeper.cancel()
        if self.run_id is not None:
            try:
                await asyncio.to_thread(
                    self.store.finish_run,
                    self.run_id,
                    "interrupted" if self.cancelled else "finished",
                )
            except StoreError:
                pass  # the run shows `stale` once this process is gone; the next server retires it

    def _keep_source(self, source: str) -> Path:
        data = source.encode()
        self.candidates.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.candidates / f"{hashlib.sha256(data).hexdigest()}.py"
        if not path.exists():
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)  # atomic: a reader never sees half a file
        return path


def refusal(what: str, exc: BaseException) -> HttpError:
    """The 503 of an evaluation the store could not keep."""
    return HttpError(
        503,
        f"the results store cannot be written, so {what}: {exc}. Send it again once the store "
        "is writable (or to a server started with --no-record)",
        headers={"Retry-After": "30"},
    )
