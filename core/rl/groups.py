"""GRPO groups gathered from single calls: a trainer whose reward loop scores one completion per
call, from several worker processes and at different times (verl's reward loop does: each sample
is scored as soon as it is generated, by any of `reward.num_workers` workers), still gets each
group evaluated as one batch of one arena (core/evaluation/batch.py: the same workloads and
seeds for every candidate of the group, the reference and the warm baseline shared).

    gather = GroupGather(arena.aevaluate_many, wait_s=30)
    rr = await gather.submit("rope#17", 8, EvalRequest("elementwise/rope", code, profile="train"))

A group is named by its caller (a task and a dataset row) and declares its size; its members
wait until all of them have arrived, or `wait_s` after the first did (a member lost upstream
never holds a group forever), and the group is then one `evaluate_many` call. A group of size 1,
or a call without a group, is evaluated at once. The callers of one gather share one arena:
where they are processes, that is `arena serve` (its `/evaluate` takes `group` and
`group_size`: docs/rl-verl.md), so that no two arenas ever time the same GPU."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from core.rl.requests import EvalRequest, RewardedResult

EvaluateMany = Callable[[Sequence[EvalRequest]], Awaitable[list[RewardedResult]]]
MAX_GROUP = 1024  # a declared group size past this is a mistake, not a GRPO group


class GroupError(ValueError):
    """A group declared inconsistently (a size that changed, members of another task)."""


@dataclass
class _Pending:
    size: int
    task_id: str
    requests: list[EvalRequest] = field(default_factory=list)
    futures: list[asyncio.Future[RewardedResult]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


class GroupGather:
    """Members of named groups held until their group is complete, then evaluated together.
    Every method runs in one event loop (the one that first calls `submit`)."""

    def __init__(self, evaluate_many: EvaluateMany, wait_s: float = 30.0):
        if not wait_s > 0:
            raise ValueError(
                f"wait_s: give the seconds a group may wait for its members, got {wait_s!r}"
            )
        self.evaluate_many, self.wait_s = evaluate_many, wait_s
        self._pending: dict[str, _Pending] = {}
        self._running: set[asyncio.Task[None]] = set()
        self.batches: list[int] = []  # the size of every evaluation made, in order (tests, logs)

    async def submit(
        self, group: str | None, size: int | None, request: EvalRequest
    ) -> RewardedResult:
        """The member's RewardedResult once its group was evaluated (at once without a group)."""
        if group is None or size is None or size <= 1:
            self.batches.append(1)
            return (await self.evaluate_many([request]))[0]
        if not isinstance(size, int) or size > MAX_GROUP:
            raise GroupError(
                f"group_size: give the group's member count (1..{MAX_GROUP}), got {size!r}"
            )
        pending = self._pending.get(group)
        if pending is None:
            pending = self._pending[group] = _Pending(size, request.task_id)
            pending.timer = asyncio.get_running_loop().call_later(self.wait_s, self._flush, group)
        elif pending.size != size or pending.task_id != request.task_id:
            raise GroupError(
                f"group `{group}` was opened for {pending.size} members of {pending.task_id}, not "
                f"{size} of {request.task_id}: name each prompt's group once (a task and a dataset row)"
            )
        future: asyncio.Future[RewardedResult] = asyncio.get_running_loop().create_future()
        pending.requests.append(request)
        pending.futures.append(future)
        if len(pending.requests) >= pending.size:
            self._flush(group)
        return await future

    def _flush(self, group: str) -> None:
        pending = self._pending.pop(group, None)
        if pending is None:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._evaluate(pending))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _evaluate(self, pending: _Pending) -> None:
        self.batches.append(len(pending.requests))
        try:
            results = await self.evaluate_many(pending.requests)
        except BaseException as exc:  # every member gets the fault, none hangs
            for f in pending.futures:
                if not f.done():
                    f.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if not isinstance(exc, Exception):
                raise
            return
        for f, rr in zip(pending.futures, results):
            if not f.done():
                f.set_result(rr)

    @property
    def waiting(self) -> int:
        """Members held for their groups now."""
        return sum(len(p.requests) for p in self._pending.values())
