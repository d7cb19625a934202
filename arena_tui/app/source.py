"""What the app watches: a run in the store, and (for a live run) the coroutine that executes it.

The app never calls the engine itself: it is handed a `RunSource` whose `start` runs the run
and reports through the two callbacks of `core.orchestration.runs.execute`. `live_source` wires the real
`execute`; tests hand a scripted fake with the same shape. A source without `start` shows a
run that has already ended, from the store alone. `control` acts on the run (triage: cancel
one attempt, re-run, requeue); a follow-up run it starts executes through `executor_factory`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from core.orchestration.pool import ExecutorFactory
from core.orchestration.runfile import RunSpec
from core.orchestration.runs import OnAttempt, OnRunEvent, RunControl, execute, local_executor
from core.store.db import Store

Starter = Callable[[OnRunEvent, OnAttempt], Awaitable[object]]


@dataclass
class RunSource:
    store: Store
    run_id: str
    spec: RunSpec | None = None
    start: Starter | None = None  # None: a finished run, shown from the store
    tasks_dir: Path | None = None
    control: RunControl | None = None  # None: the app makes one on the store (follow-up runs only)
    executor_factory: ExecutorFactory = local_executor


def live_source(
    store: Store,
    run_id: str,
    spec: RunSpec,
    executor_factory=None,
    control: RunControl | None = None,
) -> RunSource:  # type: ignore[no-untyped-def]
    """A run executed by `core.orchestration.runs.execute` inside the app's event loop, with a `RunControl`."""
    factory = executor_factory or local_executor
    control = control or RunControl(store)

    def start(on_event: OnRunEvent, on_attempt: OnAttempt) -> Awaitable[object]:
        return execute(store, run_id, spec, factory, on_event, on_attempt, control=control)

    return RunSource(
        store,
        run_id,
        spec,
        start,
        Path(spec.tasks_dir) if spec.tasks_dir else None,
        control,
        factory,
    )
