"""What `arena serve` keeps in the results store: its full evaluations, so that they reach the
leaderboard, and the ones a shutdown cut short, so that nothing is silently lost.

One run per server (named `serve`, created at its first evaluation). A full evaluation is an
`/evaluate` that is not `visible_only`, or an episode's final evaluation; visible-only turns
are an agent's drafts and are not kept. Each gets a job when it starts (state `running`), its
result when it ends, or state `cancelled` when the shutdown cancelled it. The candidate's
source is kept beside the store (`candidates/<sha256>.py`, content-addressed) and the job
points at it, so the leaderboard page can show what was scored."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
from pathlib import Path
from typing import Any

from core.model.result import Result
from core.store.db import Store


class Recorder:
    def __init__(self, store: Store, spec: dict[str, Any]):
        self.store, self.spec = store, spec
        self.run_id: str | None = None
        self.candidates = store.path.parent / "candidates"
        self.cancelled = 0
        self._count = itertools.count(1)
        self._lock = asyncio.Lock()

    async def start(
        self, task_id: str, device_id: str, source: str, agent: str | None, variant: str
    ) -> int:
        """A job in state `running` for an evaluation that is starting; returns its id."""
        async with self._lock:  # one run, created once
            if self.run_id is None:
                self.run_id = await asyncio.to_thread(self.store.create_run, "serve", self.spec)
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
        return job_id

    async def finish(self, job_id: int, result: Result) -> None:
        await asyncio.to_thread(self.store.record_result, job_id, result)

    async def cancel(self, job_id: int) -> None:
        self.cancelled += 1
        await asyncio.to_thread(self.store.set_job_state, job_id, "cancelled")

    async def close(self) -> None:
        """Finish the server's run: `interrupted` when the shutdown cancelled evaluations."""
        if self.run_id is not None:
            await asyncio.to_thread(
                self.store.finish_run, self.run_id, "interrupted" if self.cancelled else "finished"
            )

    def _keep_source(self, source: str) -> Path:
        data = source.encode()
        self.candidates.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.candidates / f"{hashlib.sha256(data).hexdigest()}.py"
        if not path.exists():
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)  # atomic: a reader never sees half a file
        return path
