"""How a run that stopped early is reported (a signal, a storage fault, another owner), and what
a new `arena run` or `arena serve` clears first: the folders and the runs of arena processes
that were killed before they could clear them themselves."""

from __future__ import annotations

import contextlib
import signal

from rich.console import Console
from rich.markup import escape

from arena_tui.signals import Interrupted, exit_code, signal_name
from core.model.result import EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE
from core.model.scratch import sweep
from core.store.db import Store
from core.store.errors import RunOwnedError, StorageFault, StoreError
from core.store.rows import STALE


def say(console: Console, text: str) -> None:
    """Print, unless the terminal is gone (SIGHUP: its writes fail with EIO)."""
    with contextlib.suppress(OSError):
        console.print(text, highlight=False, soft_wrap=True)


def stopped_run(
    store: Store, run_id: str, total: int, why: BaseException, resume: str, out: Console
) -> int:
    """Report a run that ended early; returns the exit code (docs/runs.md, "Exit codes")."""
    kept = _count(store, run_id)
    if isinstance(why, RunOwnedError):
        say(out, f"[red]error:[/] {escape(str(why))}")
        return EXIT_BAD_INPUT
    if isinstance(why, StorageFault):  # one line: the fault, what was kept, how to go on
        say(
            out,
            f"[red]error:[/] {escape(str(why))}; {kept} of {total} results kept; "
            f"once the store can be written, resume with: {escape(resume)}",
        )
        return EXIT_INFRASTRUCTURE
    sig = why.signal if isinstance(why, Interrupted) else signal.SIGINT
    with contextlib.suppress(StoreError):  # the engine marked it; a full disk may refuse again
        if store.get_run(run_id).status == "running":
            store.finish_run(run_id, "interrupted")
    say(
        out,
        f"[yellow]interrupted[/] by {signal_name(sig)}: {kept} of {total} results kept. Resume with:",
    )
    say(out, escape(resume))
    return exit_code(sig)


def _count(store: Store, run_id: str) -> int:
    try:
        return len(store.results(run_id))
    except StoreError:
        return 0


def sweep_leftovers(console: Console) -> None:
    """Remove the temporary folders of arena processes of this host that were killed (the
    candidates' sources and job files of a server that got SIGKILL): core/model/scratch.py."""
    removed = sweep()
    if removed:
        pids = sorted({s.owner.pid for s in removed})
        say(
            console,
            f"[dim]removed {len(removed)} temporary folder(s) left by stopped arena process(es) "
            f"{', '.join(map(str, pids))}[/]",
        )


def retire_stale_serve_runs(store: Store, console: Console) -> None:
    """A killed server's run stays `running` in the store, with jobs `running` that no one will
    finish: its evaluations' clients got no answer. A server's run is never resumed, so the next
    server marks such a run `interrupted` and those jobs `cancelled` (what a drained shutdown
    records)."""
    try:
        stale = [r for r in store.list_runs() if r.name == "serve" and r.status == STALE]
        for run in stale:
            for job in store.jobs(run.id, state="running") + store.jobs(run.id, state="queued"):
                store.set_job_state(job.id, "cancelled")
            store.finish_run(run.id, "interrupted")
    except StoreError:
        return  # a read-only store: it stays as it is
    for run in stale:
        owner = run.lease.owner.describe() if run.lease else "a process"
        say(console, f"[dim]run {run.id} of a stopped server ({owner}): marked interrupted[/]")
