"""The Kernel Arena app: watches one run (live or finished) on five screens.

The run executes in an async worker on the app's own event loop (the engine is asyncio and
its SSH connections are bound to their loop). The engine's callbacks only append to a buffer;
a timer drains it every `flush_interval` seconds into the `RunModel` and tells the active
screen once (`RunUpdated`), so a burst of hundreds of events per second costs one redraw per
tick, not one per event.

Triage acts on one row through the source's `core.orchestration.runs.RunControl`: cancel one attempt, re-run
an evaluation with its stored seed, requeue it on another device (live: a job of this run;
after the run: a follow-up run, which the app then executes and shows), and mark a result an
infrastructure fault (kept in the store).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from arena_tui.app.messages import RunUpdated
from arena_tui.app.model import Row, RunItem, RunModel
from arena_tui.app.screens.help import HelpScreen
from arena_tui.app.screens.leaderboard import LeaderboardScreen
from arena_tui.app.screens.queue import QueueScreen
from arena_tui.app.screens.scores import ScoresScreen
from arena_tui.app.screens.transcripts import TranscriptsScreen
from arena_tui.app.screens.triage import TriageScreen
from arena_tui.app.source import RunSource, live_source
from core.orchestration.runs import AttemptReport, Queued, RunControl

TICK_S = 1.0  # elapsed times move once a second even when no event arrives


class ArenaApp(App[int]):
    CSS_PATH = "arena.tcss"
    TITLE = "Kernel Arena"
    MODES: ClassVar[dict[str, type[Screen[Any]]]] = {
        "queue": QueueScreen,
        "transcripts": TranscriptsScreen,
        "scores": ScoresScreen,
        "leaderboard": LeaderboardScreen,
        "triage": TriageScreen,
    }
    DEFAULT_MODE = "queue"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "switch_mode('queue')", "Queue"),
        Binding("2", "switch_mode('transcripts')", "Transcripts"),
        Binding("3", "switch_mode('scores')", "Scores"),
        Binding("4", "switch_mode('leaderboard')", "Board"),
        Binding("5", "switch_mode('triage')", "Triage"),
        Binding("question_mark", "help", "Help"),
        Binding("x", "cancel_run", "Cancel run"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        source: RunSource,
        *,
        clock: Callable[[], float] = time.monotonic,
        flush_interval: float = 0.1,
    ) -> None:
        super().__init__()
        self.source = source
        self.control = source.control or RunControl(source.store, source.tasks_dir)
        self.clock = clock
        self.model = RunModel(source.store, source.run_id, clock)
        self.model.reload()  # before the first screen mounts: it draws what the store has
        self.flush_interval = flush_interval
        self.selected: str | None = None  # the row the scores and triage screens show
        self.run_state = "running" if source.start is not None else "viewing"
        self._pending: list[RunItem] = []
        self._last_tick = 0.0
        self.events_seen = 0
        self.last_edited: str | None = None  # the file triage last opened in $EDITOR
        self.stopped_by: int | None = None  # the signal that stopped the app, if one did

    # -- the run --------------------------------------------------------------------------

    def on_mount(self) -> None:
        from arena_tui.signals import install

        # SIGINT, SIGTERM, SIGHUP: stop the run as the quit key does (arena_tui/signals.py).
        self._remove_signals = install(lambda sig: self.run_worker(self._stop_on_signal(sig)))
        self._update_subtitle()
        self.set_interval(self.flush_interval, self.flush)
        if self.source.start is not None:
            self._execute()

    def _on_event(self, job_id: int | None, event: object) -> None:
        self._pending.append((job_id, event))  # type: ignore[arg-type]

    def _on_attempt(self, report: AttemptReport) -> None:
        self._pending.append(report)

    @work(exclusive=True, group="run", exit_on_error=False, description="execute the run")
    async def _execute(self) -> None:
        assert self.source.start is not None
        try:
            await self.source.start(self._on_event, self._on_attempt)
            self.run_state = "finished"
        except asyncio.CancelledError:
            self.run_state = "cancelled"
            raise
        except Exception as exc:  # noqa: BLE001 - shown, and the run stays resumable
            self.run_state = "error"
            self.notify(f"the run stopped: {exc}", severity="error", timeout=30)
        finally:
            self.flush(force=True)

    def feed(self, items: Iterable[RunItem]) -> None:
        """Queue items as the engine would (tests and replays)."""
        self._pending.extend(items)

    def flush(self, force: bool = False) -> None:
        """Apply what arrived since the last tick and have the active screen redraw once."""
        items, self._pending = self._pending, []
        now = time.monotonic()
        if items:
            self.events_seen += len(items)
            self.model.apply(items)
        elif not force and not (self.run_state == "running" and now - self._last_tick >= TICK_S):
            return
        self._last_tick = now
        self._update_subtitle()
        self.screen.post_message(RunUpdated())

    def _update_subtitle(self) -> None:
        counts = self.model.counts()
        shown = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        self.sub_title = f"run {self.source.run_id} — {self.run_state}" + (
            f" — {shown}" if shown else ""
        )

    @property
    def running(self) -> bool:
        return self.run_state == "running"

    # -- actions --------------------------------------------------------------------------

    async def action_cancel_run(self) -> None:
        """Cancel the whole run: the engine stops its agents, records them cancelled and
        leaves the run resumable (`arena run --resume RUN`)."""
        if not self.running:
            self.notify("no run is executing", severity="warning")
            return
        await self._stop_run()
        self.notify(f"run cancelled; resume with: arena run --resume {self.source.run_id}")

    async def _stop_run(self) -> None:
        # Stopping takes seconds (agents and harnesses are killed and waited for): say so first,
        # and let the screen draw it before anything blocks.
        counts = self.model.counts()
        busy = sum(n for state, n in counts.items() if state not in ("done", "failed", "cancelled"))
        self.sub_title = f"run {self.source.run_id} — stopping: {busy} unfinished rows"
        self.notify(
            f"stopping the run: its agents and evaluations ({busy} unfinished) are being killed; "
            f"it stays resumable (arena run --resume {self.source.run_id})",
            timeout=60,
        )
        await asyncio.sleep(0.05)
        for worker in list(self.workers):
            if worker.group == "run" and worker.is_running:
                worker.cancel()
                try:
                    await worker.wait()
                except Exception:  # noqa: BLE001 - WorkerCancelled is the expected outcome
                    pass
        if self.run_state == "running":
            self.run_state = "cancelled"
        self.flush(force=True)

    async def _stop_on_signal(self, sig: int) -> None:
        if self.stopped_by is None:
            self.stopped_by = sig
            if self.running:
                await self._stop_run()  # agents and harnesses end; the engine marks the run
            self.exit(return_code=128 + sig)

    def on_unmount(self) -> None:
        self._remove_signals()

    async def action_quit(self) -> None:
        if self.running:
            await self._stop_run()  # agents and harnesses die with the run, never orphaned
        self.exit(0)

    # -- triage: act on one row (the queue's and triage's keys) -----------------------------

    def cancel_attempt(self, row: Row | None) -> None:
        """Stop one agent of the executing run; the others go on."""
        if row is None or row.kind != "attempt":
            self.notify("pick an agent attempt to cancel", severity="warning")
        elif not self.control.live:
            self.notify("the run is not executing: nothing to cancel", severity="warning")
        elif self.control.cancel_attempt(row.key):
            self.notify(f"{row.key}: cancelling its agent (recorded cancelled; the run goes on)")
        else:
            self.notify(f"{row.key} is not running", severity="warning")

    def rerun(self, row: Row | None) -> None:
        """Evaluate the row's candidate again with the stored secret seed, on the same device."""
        self._queue(row, "re-run with the stored seed", lambda job: self.control.rerun(job))

    def requeue(self, row: Row | None) -> None:
        """Evaluate the row's candidate again on the next device of the run (a fresh seed)."""
        if row is None:
            return
        devices = list(
            (self.source.spec.devices if self.source.spec else None)
            or self.source.store.get_run(self.source.run_id).spec.get("devices")
            or ()
        )
        others = [d for d in devices if d != row.device]
        if not others:
            self.notify(
                f"the run has no device but {row.device}: nothing to requeue on", severity="warning"
            )
            return
        device = others[(devices.index(row.device) if row.device in devices else -1) % len(others)]
        self._queue(row, f"requeued on {device}", lambda job: self.control.requeue(job, device))

    def _queue(self, row: Row | None, what: str, act: Callable[[int], Queued]) -> None:
        if row is None or row.job_id is None:
            self.notify(
                "pick a row with an evaluation (an attempt's final one, or a job)",
                severity="warning",
            )
            return
        if self.running and not self.control.live:
            self.notify("wait for the run to end: it cannot take new jobs now", severity="warning")
            return
        try:
            queued = act(row.job_id)
        except (ValueError, LookupError) as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        if queued.spec is None:
            self.notify(f"{row.key}: {what} as job {queued.job_id} of this run")
            return
        self.notify(f"{row.key}: {what} in follow-up run {queued.run_id}")
        self.open_run(
            live_source(
                self.source.store,
                queued.run_id,
                queued.spec,
                self.source.executor_factory,
                self.control,
            )
        )

    def open_run(self, source: RunSource) -> None:
        """Watch another run (a follow-up run of one job): execute it here when it has a start."""
        self.source = source
        self.model = RunModel(source.store, source.run_id, self.clock)
        self.model.reload()
        self.selected = None
        self.run_state = "running" if source.start is not None else "viewing"
        if source.start is not None:
            self._execute()
        self.flush(force=True)

    def mark_infrastructure(self, row: Row | None, note: str) -> None:
        """Mark (or unmark) the row's result an infrastructure fault, in the store: kept across
        sessions, shown by `arena runs show`, left out of the leaderboard; the result is unchanged."""
        if row is None or row.job_id is None or row.result is None:
            self.notify("only a recorded result can be marked", severity="warning")
            return
        marked = not row.marked_infrastructure
        self.source.store.mark_infrastructure(row.job_id, note, marked=marked)
        row.marked_infrastructure = marked
        self.model.version += 1
        self.model.results_version += 1  # the leaderboard re-queries
        self.notify(
            f"{row.key}: {'marked' if marked else 'unmarked'} as an infrastructure fault (kept in the store)"
        )
        self.flush(force=True)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def show_row(self, key: str, mode: str) -> None:
        """Select a row and open a screen on it (the queue's enter, t and e keys)."""
        self.selected = key
        self.switch_mode(mode)
        self.screen.post_message(RunUpdated())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """One palette entry per action (ctrl+p), with the key that does the same."""
        yield from super().get_system_commands(screen)
        for mode, title in (
            ("queue", "Queue"),
            ("transcripts", "Transcripts"),
            ("scores", "Scores"),
            ("leaderboard", "Leaderboard"),
            ("triage", "Triage"),
        ):
            yield SystemCommand(
                f"Show {title}",
                f"switch to the {title.lower()} screen",
                lambda m=mode: self.switch_mode(m),
            )
        yield SystemCommand(
            "Cancel run",
            "stop every agent and evaluation of the run (x); it stays resumable",
            self.action_cancel_run,
        )
        yield SystemCommand("Help", "keys and screens (?)", self.action_help)
        for title, help_text, action in getattr(screen, "COMMANDS_HERE", ()):
            yield SystemCommand(title, help_text, getattr(screen, f"action_{action}"))
