"""Progress while a stage runs: the engine's heartbeat.

The harness reports a stage when it starts and ends and each workload as it is judged; a
candidate that hangs in `run` reports nothing until the stage's limit tears it down (three
minutes on the CPU). `Pulse` follows an evaluation's events and, from a timer on the engine's
event loop, sends a `Heartbeat` every `every_s` seconds while a stage runs (the stage's start and
end reset the count; a workload's event does not, since a compact printer shows none): the stage,
the workload it is on (the next one in the job's order), how long the stage has run and its limit.
It comes from the engine, not the harness, so it reaches every front end whatever executes the
job (this machine, SSH, Ray) and whatever the candidate does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from core.model import events

EVERY_S = 9.0  # at most 10 s of silence: the timer looks every second
T = TypeVar("T")
LIMIT_OF = {
    "compile": "compile_s",
    "correctness": "correctness_s",
    "generalization": "correctness_s",
    "performance": "performance_s",
}


class Pulse:
    """An `on_event` wrapper that keeps where the evaluation stands; `beat()` says it."""

    def __init__(
        self,
        job: dict[str, Any],
        on_event: Callable[[events.Event], None] | None,
        every_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_beat: Callable[[events.Event], None] | None = None,
    ):
        """Events go on to `on_event`; heartbeats to `on_beat` (default: `on_event`)."""
        self.on_event, self.clock = on_event, clock
        self.every_s = EVERY_S if every_s is None else every_s
        self.on_beat = on_beat if on_beat is not None else on_event
        stages = job.get("stages") or {}
        self.labels: dict[str, list[str]] = {
            name: [str(w.get("label")) for w in stages.get(name) or []]
            for name in ("correctness", "generalization", "performance")
        }
        self.labels["compile"] = self.labels["correctness"][:1]  # the first call compiles
        self.limits: dict[str, Any] = job.get("limits") or {}
        self.stage: str | None = None
        self.started = self.last = clock()
        self.done = 0

    def __call__(self, event: events.Event) -> None:
        now = self.clock()
        if isinstance(event, events.StageStarted):
            self.stage, self.started, self.done = event.stage, now, 0
        elif isinstance(event, (events.StageFinished, events.EvaluationFinished)):
            self.stage = None
        elif isinstance(event, events.WorkloadChecked) or (
            isinstance(event, events.WorkloadTimed) and self.stage == "performance"
        ):
            self.done += 1
        if isinstance(event, (events.StageStarted, events.StageFinished)):
            self.last = now  # a front end may print no workload event (`arena demo`): not those
        if self.on_event is not None:
            self.on_event(event)

    def beat(self) -> events.Heartbeat | None:
        """Where the running stage stands now (None between stages)."""
        if self.stage is None:
            return None
        labels = self.labels.get(self.stage, [])
        limit = self.limits.get(LIMIT_OF.get(self.stage, ""))
        return events.Heartbeat(
            stage=self.stage,
            elapsed_s=round(self.clock() - self.started, 1),
            limit_s=float(limit) if isinstance(limit, (int, float)) else None,
            workload=labels[self.done % len(labels)] if labels else None,  # a batch: round again
            done=self.done % len(labels) if labels else self.done,
            total=(len(labels) or None) if self.stage != "compile" else None,
        )

    def due(self) -> events.Heartbeat | None:
        """A heartbeat when `every_s` passed since the stage began or the last beat (sent, too)."""
        if self.on_beat is None or self.clock() - self.last < self.every_s:
            return None
        beat = self.beat()
        if beat is not None:
            self.last = self.clock()
            self.on_beat(beat)
        return beat

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.every_s / 2))
            self.due()

    async def around(self, work: Awaitable[T]) -> T:
        """Await `work`, beating meanwhile."""
        ticker = asyncio.create_task(self._tick())
        try:
            return await work
        finally:
            ticker.cancel()
