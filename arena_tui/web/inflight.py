"""The RL service's evaluations in flight: each is a task the service tracks, bounded (`max_queue`:
429 beyond), refused while draining (503), recorded in the store when a recorder is given, and
let finish or cancelled at shutdown (`drain`), so the recorder keeps either outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from arena_tui.web.errors import HttpError
from arena_tui.web.recorder import Recorder

T = TypeVar("T")


class InflightEvaluations:
    """What RLService's endpoints run their evaluations through (a base class: the service
    sets these attributes)."""

    arena: Any  # core.rl.arena.Arena
    recorder: Recorder | None
    max_queue: int
    draining: bool
    _inflight: dict[asyncio.Task[Any], int]  # evaluation task -> evaluations it holds

    @property
    def queued(self) -> int:
        return sum(self._inflight.values())

    async def _tracked(self, work: Coroutine[Any, Any, T], count: int = 1) -> T:
        refusal = self._refusal(count)
        if refusal is not None:
            work.close()  # never started
            raise refusal
        task = asyncio.ensure_future(work)
        self._inflight[task] = count
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:  # the request itself was cancelled (a forced shutdown)
            task.cancel()
            raise
        finally:
            self._inflight.pop(task, None)
        if task.cancelled():
            raise HttpError(
                503,
                "the server shut down before this evaluation finished: it was cancelled (and recorded so); "
                "send it again",
                headers={"Retry-After": "5"},
            )
        return task.result()

    def _refusal(self, count: int) -> HttpError | None:
        if self.draining:
            return HttpError(
                503,
                "the server is shutting down: send the request to another server or retry once it is back",
                headers={"Retry-After": "5"},
            )
        if self.queued + count > self.max_queue:
            return HttpError(
                429,
                f"{self.queued} evaluations are waiting or running and this request adds {count}: the most allowed is "
                f"{self.max_queue} (--max-queue); retry when some have answered",
                headers={"Retry-After": "1"},
            )
        return None

    async def drain(self, grace_s: float) -> tuple[int, int]:
        """Refuse new evaluations, give those in flight `grace_s` seconds to finish, cancel the
        rest (the recorder marks them cancelled). Returns (finished, cancelled)."""
        self.draining = True
        counts = dict(self._inflight)
        tasks = set(counts)
        if not tasks:
            return 0, 0
        done, pending = await asyncio.wait(tasks, timeout=max(grace_s, 0))
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=30)  # each records its cancellation
        return sum(counts[t] for t in done), sum(counts[t] for t in pending)

    async def _recorded(
        self, request: Any, work: Callable[[], Awaitable[Any]], agent: str | None, variant: str
    ) -> Any:
        """Run `work` (giving a RewardedResult) with a job for it in the store, if recording."""
        job = None
        if (
            self.recorder is not None and not request.visible_only
        ):  # a visible-only draft is not kept
            device = request.device or (
                self.arena.devices[0] if len(self.arena.devices) == 1 else "any"
            )
            job = await self.recorder.start(request.task_id, device, request.source, agent, variant)
        try:
            rr = await work()
        except BaseException:
            if job is not None:
                await asyncio.shield(self.recorder.cancel(job))  # type: ignore[union-attr]
            raise
        if job is not None:
            await self.recorder.finish(job, rr.result)  # type: ignore[union-attr]
        return rr
