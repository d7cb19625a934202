"""Asyncio dispatch of jobs onto device slots.

A `Slot` is one place a job can run: a device and an index (one per GPU, several per CPU). A
`Job` names the devices it may run on; the caller's runner, `async def runner(job, slot)`,
does the work and returns the outcome. The scheduler decides where and when: higher priority
first, first come first served within a priority, every slot on its own so a hung job holds
only its slot. A runner that raises `InfrastructureFault` has its job retried on another slot
(another device first); any other exception is the caller's bug and fails the job. A
candidate's failure is an outcome like any other and is never retried.

    async with Scheduler(slots_for(["cuda:0", "cuda:1"]), runner, on_event=print) as s:
        futures = [s.submit(Job(f"job-{i}", ("cuda:0", "cuda:1"), payload=p)) for i, p in enumerate(payloads)]
        await s.join()

Each future gives the runner's outcome, raises `JobFailed`, or is cancelled. Every state change
is a `JobStateChanged` event: queued → running → done | failed | cancelled, and running →
retrying → running after an infrastructure fault.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from core.model.events import DeviceHealthChanged, Event, JobStateChanged
from core.orchestration.slots import (
    InfrastructureFault,
    Job,
    JobFailed,
    Runner,
    SchedulerClosed,
    Slot,
    capacity,
    default_cpu_slots,
    slots_for,
)

log = logging.getLogger(__name__)

OnEvent = Callable[[Event], None]


@dataclass(eq=False)
class _Entry:
    """A live job's state inside the scheduler."""

    job: Job
    seq: int
    future: asyncio.Future
    state: str = "queued"
    attempts: int = 0
    tried: list[str] = field(default_factory=list)  # the device of each failed attempt, in order
    failed_slots: set[Slot] = field(default_factory=set)
    reasons: list[str] = field(default_factory=list)
    task: asyncio.Task | None = None
    cancelling: bool = False

    @property
    def key(self) -> tuple[int, int]:
        return (-self.job.priority, self.seq)


class Scheduler:
    """Runs submitted jobs on slots through `runner`. Use as an async context manager: leaving
    the block waits for every job (or, on an exception, cancels them and waits for their
    cleanup). `unhealthy_after` consecutive infrastructure faults take a device out of use
    (None: never); `mark_healthy` brings it back."""

    def __init__(
        self,
        slots: Iterable[Slot],
        runner: Runner,
        max_retries: int = 2,
        on_event: OnEvent | None = None,
        unhealthy_after: int | None = 3,
    ):
        self.slots = list(slots)
        if not self.slots:
            raise ValueError(
                "a scheduler needs at least one slot: build them with slots_for(device_ids)"
            )
        if len(set(self.slots)) != len(self.slots):
            raise ValueError("the same slot is listed twice: each (device, index) pair once")
        if max_retries < 0:
            raise ValueError(f"max_retries is {max_retries}: give 0 or more")
        self.runner, self.max_retries, self.on_event, self.unhealthy_after = (
            runner,
            max_retries,
            on_event,
            unhealthy_after,
        )
        self._devices = {s.device for s in self.slots}
        self._queue: list[_Entry] = []  # waiting (queued or retrying), sorted by key
        self._live: dict[str, _Entry] = {}  # waiting or running, by job id
        self._busy: dict[Slot, _Entry] = {}
        self._unhealthy: set[str] = set()
        self._streak: Counter[str] = Counter()  # consecutive infrastructure faults per device
        self._seq = itertools.count()
        self._idle = asyncio.Event()
        self._idle.set()
        self._dispatch_pending = False
        self._closed = False

    async def __aenter__(self) -> Scheduler:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            if exc_type is None:
                await self.join()
        finally:
            await self.close()

    # --- the public surface ----------------------------------------------------------------

    def submit(self, job: Job) -> asyncio.Future:
        """Queue a job; the future gives the runner's outcome, raises `JobFailed`, or is
        cancelled. Cancelling the future cancels the job. Call from within the event loop."""
        if self._closed:
            raise SchedulerClosed(
                f"job {job.id} submitted after the scheduler was closed: submit inside `async with`"
            )
        if job.id in self._live:
            raise ValueError(f"job {job.id} is already queued or running: give each job its own id")
        unknown = [d for d in job.devices if d not in self._devices]
        if unknown:
            raise ValueError(
                f"job {job.id} may run on {', '.join(unknown)}, which have no slot here; slots exist for {', '.join(sorted(self._devices))}"
            )
        entry = _Entry(job, next(self._seq), asyncio.get_running_loop().create_future())
        self._live[job.id] = entry
        self._idle.clear()
        entry.future.add_done_callback(partial(self._future_done, entry))
        self._emit_job(entry, "queued")
        if not self._healthy_devices(entry):
            self._finish(
                entry,
                "failed",
                fault="infrastructure",
                reason=f"every device it may run on is unhealthy: {', '.join(job.devices)}",
            )
        else:
            self._enqueue(entry)
        return entry.future

    def cancel(self, job_id: str) -> bool:
        """Cancel a job: a waiting one leaves the queue at once; a running one has its runner
        cancelled and is reported cancelled once the runner's cleanup has run. False when no
        such job is queued or running."""
        entry = self._live.get(job_id)
        if entry is None:
            return False
        if entry.task is None:
            self._queue.remove(entry)
            self._finish(entry, "cancelled", reason=f"cancelled while {entry.state}")
        elif not entry.cancelling:
            entry.cancelling = True
            entry.task.cancel()
        return True

    def cancel_all(self) -> int:
        """Cancel every queued and running job; the number cancelled."""
        return sum(self.cancel(job_id) for job_id in list(self._live))

    async def join(self) -> None:
        """Wait until no job is queued or running."""
        await self._idle.wait()

    async def close(self) -> None:
        """Refuse new jobs, cancel the rest, and wait for their runners' cleanup."""
        self._closed = True
        self.cancel_all()
        await self.join()

    def mark_healthy(self, device: str) -> None:
        """Send jobs to a device taken out of use again."""
        if device in self._unhealthy:
            self._unhealthy.discard(device)
            self._streak[device] = 0
            self._emit(DeviceHealthChanged(device, True, "marked healthy"))
            self._schedule_dispatch()

    @property
    def unhealthy(self) -> frozenset[str]:
        return frozenset(self._unhealthy)

    @property
    def running(self) -> tuple[str, ...]:
        """The ids of the jobs on a slot now."""
        return tuple(entry.job.id for entry in self._busy.values())

    # --- dispatch ---------------------------------------------------------------------------

    def _enqueue(self, entry: _Entry) -> None:
        bisect.insort(self._queue, entry, key=lambda e: e.key)
        self._schedule_dispatch()

    def _schedule_dispatch(self) -> None:
        # Deferred to the next turn of the loop, so that jobs submitted together are ordered by
        # priority before any of them takes a slot.
        if not self._dispatch_pending:
            self._dispatch_pending = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_pending = False
        free = [s for s in self.slots if s not in self._busy and s.device not in self._unhealthy]
        for entry in list(self._queue):
            if not free:
                break
            if entry.task is not None or self._live.get(entry.job.id) is not entry:
                continue  # an event handler cancelled or started it during this pass
            slot = self._pick(entry, free)
            if slot is not None:
                self._queue.remove(entry)
                free.remove(slot)
                self._start(entry, slot)

    def _pick(self, entry: _Entry, free: list[Slot]) -> Slot | None:
        """The free slot this job should take now, or None to wait. A retried job waits for a
        device it has not failed on while one is healthy; only then does it go back to one it
        failed on (the longest ago first, another slot of it first). Otherwise the least
        loaded device wins, then slot order."""
        allowed = [s for s in free if s.device in entry.job.devices]
        if not allowed:
            return None
        load = Counter(s.device for s in self._busy)
        if entry.tried:
            untried = set(self._healthy_devices(entry)) - set(entry.tried)
            if untried:
                allowed = [s for s in allowed if s.device in untried]
            else:
                last = {d: i for i, d in enumerate(entry.tried)}
                return min(
                    allowed, key=lambda s: (last[s.device], s in entry.failed_slots, load[s.device])
                )
        return min(allowed, key=lambda s: load[s.device]) if allowed else None

    def _start(self, entry: _Entry, slot: Slot) -> None:
        entry.attempts += 1
        entry.state = "running"
        self._busy[slot] = entry
        job = replace(entry.job, attempts=entry.attempts - 1)
        entry.task = asyncio.get_running_loop().create_task(
            self._call(job, slot), name=f"job {job.id} on {slot.id}"
        )
        entry.task.add_done_callback(partial(self._attempt_done, entry, slot))
        self._emit_job(entry, "running", slot)

    async def _call(self, job: Job, slot: Slot) -> Any:
        return await self.runner(job, slot)

    def _attempt_done(self, entry: _Entry, slot: Slot, task: asyncio.Task) -> None:
        del self._busy[slot]
        entry.task = None
        if entry.cancelling or task.cancelled():
            self._finish(entry, "cancelled", slot, reason="cancelled while running")
        else:
            exc = task.exception()
            if exc is None:
                self._streak[slot.device] = 0
                self._finish(entry, "done", slot, outcome=task.result())
            elif isinstance(exc, InfrastructureFault):
                self._fault(entry, slot, exc.reason)
            else:
                self._finish(
                    entry,
                    "failed",
                    slot,
                    fault="error",
                    reason=f"the runner raised {type(exc).__name__}: {exc}",
                    cause=exc,
                )
        self._schedule_dispatch()

    def _fault(self, entry: _Entry, slot: Slot, reason: str) -> None:
        entry.tried.append(slot.device)
        entry.failed_slots.add(slot)
        entry.reasons.append(f"{slot.id}: {reason}")
        self._streak[slot.device] += 1
        if (
            self.unhealthy_after
            and self._streak[slot.device] >= self.unhealthy_after
            and slot.device not in self._unhealthy
        ):
            self._mark_unhealthy(
                slot.device,
                f"{self._streak[slot.device]} infrastructure faults in a row, the last: {reason}",
            )
        if entry.attempts > self.max_retries:
            self._finish(
                entry,
                "failed",
                slot,
                fault="infrastructure",
                reason=f"infrastructure fault on all {entry.attempts} attempts: "
                + "; ".join(entry.reasons),
            )
        elif not self._healthy_devices(entry):
            self._finish(
                entry,
                "failed",
                slot,
                fault="infrastructure",
                reason="no healthy device left to retry on: " + "; ".join(entry.reasons),
            )
        else:
            entry.state = "retrying"
            self._emit_job(entry, "retrying", slot, reason=reason, fault="infrastructure")
            self._enqueue(entry)

    def _mark_unhealthy(self, device: str, reason: str) -> None:
        self._unhealthy.add(device)
        self._emit(DeviceHealthChanged(device, False, reason))
        for entry in list(self._queue):
            if not self._healthy_devices(entry):
                self._queue.remove(entry)
                self._finish(
                    entry,
                    "failed",
                    fault="infrastructure",
                    reason=f"every device it may run on is unhealthy: {', '.join(entry.job.devices)}",
                )

    def _healthy_devices(self, entry: _Entry) -> list[str]:
        return [d for d in entry.job.devices if d not in self._unhealthy]

    # --- endings and events -----------------------------------------------------------------

    def _finish(
        self,
        entry: _Entry,
        state: str,
        slot: Slot | None = None,
        outcome: Any = None,
        fault: str | None = None,
        reason: str | None = None,
        cause: BaseException | None = None,
    ) -> None:
        entry.state = state
        del self._live[entry.job.id]
        self._emit_job(entry, state, slot, reason=reason, fault=fault)
        future = entry.future
        if not future.done():
            if state == "done":
                future.set_result(outcome)
            elif state == "cancelled":
                future.cancel(reason)
            else:
                error = JobFailed(entry.job.id, fault or "error", reason or "", entry.attempts)
                error.__cause__ = cause
                future.set_exception(error)
        if not self._live:
            self._idle.set()

    def _future_done(self, entry: _Entry, future: asyncio.Future) -> None:
        # The caller cancelled the future (asyncio.wait_for timing out, say): cancel the job.
        if future.cancelled() and self._live.get(entry.job.id) is entry:
            self.cancel(entry.job.id)

    def _emit_job(
        self,
        entry: _Entry,
        state: str,
        slot: Slot | None = None,
        reason: str | None = None,
        fault: str | None = None,
    ) -> None:
        self._emit(
            JobStateChanged(
                job_id=entry.job.id,
                state=state,
                device=slot.device if slot else None,
                slot=slot.index if slot else None,
                attempt=entry.attempts,
                reason=reason,
                fault=fault,
            )
        )

    def _emit(self, event: Event) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # a front end's bug must not stop the jobs
            log.exception("the scheduler's on_event handler raised on %s", event)


__all__ = [
    "InfrastructureFault",
    "Job",
    "JobFailed",
    "OnEvent",
    "Runner",
    "Scheduler",
    "SchedulerClosed",
    "Slot",
    "capacity",
    "default_cpu_slots",
    "slots_for",
]
