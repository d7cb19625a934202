"""What the app watches: a run in the store, and (for a live run) the coroutine that executes it.

The app never calls the engine itself: it is handed a `RunSource` whose `start` runs the run
and reports through the two callbacks of `core.runs.execute`. `live_source` wires the real
`execute`; tests hand a scripted fake with the same shape. A source without `start` shows a
run that has already ended, from the store alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from core.runs import OnAttempt, OnRunEvent, RunSpec, execute
from core.store import Store

Starter = Callable[[OnRunEvent, OnAttempt], Awaitable[object]]


@dataclass
class RunSource:
    store: Store
    run_id: str
    spec: RunSpec | None = None
    start: Starter | None = None  # None: a finished run, shown from the store
    tasks_dir: Path | None = None


def live_source(store: Store, run_id: str, spec: RunSpec, executor_factory=None) -> RunSource:  # type: ignore[no-untyped-def]
    """A run executed by `core.runs.execute` inside the app's event loop."""

    def start(on_event: OnRunEvent, on_attempt: OnAttempt) -> Awaitable[object]:
        if executor_factory is None:
            return execute(store, run_id, spec, on_event=on_event, on_attempt=on_attempt)
        return execute(store, run_id, spec, executor_factory, on_event, on_attempt)

    return RunSource(store, run_id, spec, start, Path(spec.tasks_dir) if spec.tasks_dir else None)
