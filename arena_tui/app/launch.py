"""How the command line opens the app: `arena` alone and `arena run` when interactive."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from rich.console import Console

from core.model.result import EXIT_FAILED, EXIT_INFRASTRUCTURE, EXIT_PASSED
from core.orchestration.runfile import DEFAULT_RUN, RunSpec
from core.store.db import Store
from core.tasks.discovery import discover


def interactive(headless: bool = False) -> bool:
    """The app only where a person watches: both ends a terminal, and no --headless. Pipes,
    CI and tests (capsys) get the plain printer, exactly as before the app existed."""
    return not headless and sys.stdout.isatty() and sys.stdin.isatty()


def run_app(
    store: Store, run_id: str, spec: RunSpec, executor_factory=None, resume: str | None = None
) -> int:  # type: ignore[no-untyped-def]
    """Execute the run inside the app; the exit code is the headless one: 130 when cancelled,
    128 + N when signal N (SIGINT, SIGTERM, SIGHUP) stopped it (arena_tui/signals.py)."""
    from arena_tui.app.app import ArenaApp
    from arena_tui.app.source import live_source
    from arena_tui.signals import exit_code, signal_name
    from arena_tui.stopping import say

    resume = resume or f"arena run --resume {run_id}"
    app = ArenaApp(live_source(store, run_id, spec, executor_factory))
    app.run()
    out = Console()
    if app.stopped_by is not None:
        kept = len(store.results(run_id))
        say(
            out,
            f"run {run_id} interrupted by {signal_name(app.stopped_by)}: {kept} results kept. Resume with:",
        )
        say(out, resume)
        return exit_code(app.stopped_by)
    if app.run_state == "cancelled" or (app.run_state == "running"):
        print(f"run {run_id} interrupted; resume it with: {resume}")
        return 130
    if app.run_state == "error":
        return EXIT_INFRASTRUCTURE
    statuses = [r.status for r in store.results(run_id)]
    print(
        f"run {run_id} {app.run_state}: {statuses.count('passed')} of {len(statuses)} results passed (arena runs show {run_id})"
    )
    return EXIT_PASSED if all(s == "passed" for s in statuses) else EXIT_FAILED


def run_default(
    tasks_dir: Path | None, db: Path | None, executor_factory=None, device: str | None = None
) -> int:  # type: ignore[no-untyped-def]
    """`arena` alone in a terminal: the app on the embedded default run, on `device` (the
    caller's default_device()) when given. With --tasks-dir, every task there (as the printer
    does), else the three quick demo tasks."""
    tasks = tuple(t.id for t in discover(tasks_dir)) if tasks_dir else DEFAULT_RUN.tasks
    devices = (device,) if device else DEFAULT_RUN.devices
    spec = RunSpec(
        **{
            **DEFAULT_RUN.__dict__,
            "tasks": tasks,
            "devices": devices,
            "tasks_dir": str(tasks_dir) if tasks_dir else None,
        }
    )
    with Store.open(db) as store:
        run_id = store.create_run(spec.name, spec.to_json())
        where = [
            *(["--db", str(db)] if db else []),
            *(["--tasks-dir", str(tasks_dir)] if tasks_dir else []),
        ]
        resume = shlex.join(["arena", *where, "run", "--resume", run_id])
        return run_app(store, run_id, spec, executor_factory, resume=resume)
