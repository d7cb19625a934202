"""Transcripts: the agents' live streams side by side, by default every agent on one task."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.widgets import Header, Static

from arena_tui.app.keys import Key, bindings, commands
from arena_tui.app.model import Row
from arena_tui.app.screens.base import RunScreen
from arena_tui.app.widgets.footer import ArenaFooter
from arena_tui.app.widgets.transcript_pane import TranscriptPane

MAX_PANES = 4


class TranscriptsScreen(RunScreen):
    KEYS = (
        Key(
            "n",
            "next_task",
            "Next task",
            "Transcripts of the next task",
            "every agent on the next task",
        ),
        Key(
            "p",
            "previous_task",
            "Prev task",
            "Transcripts of the previous task",
            "every agent on the previous task",
        ),
        Key(
            "a",
            "running",
            "Running",
            "Transcripts of running attempts",
            "the attempts running now, side by side",
        ),
        Key(
            "z",
            "fold",
            "Fold/unfold",
            "Fold or unfold long outputs",
            "show tool results whole or folded",
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = bindings(KEYS)
    COMMANDS_HERE = commands(KEYS)

    def __init__(self) -> None:
        super().__init__()
        self.folded = True
        self.shown: tuple[str, ...] = ()  # attempt ids in the panes
        self.task_id: str | None = None  # the task whose attempts show; None: not chosen yet
        self.only_running = False  # `a`: the attempts running now, whatever their task

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="transcripts-title")
        yield Horizontal(id="panes")
        yield ArenaFooter()

    def _attempts(self) -> list[Row]:
        return [r for r in self.model.rows.values() if r.kind == "attempt"]

    def _tasks(self) -> list[str]:
        return list(dict.fromkeys(r.task for r in self._attempts()))

    def _choose(self) -> list[Row]:
        """The attempts to show: the chosen task's, else the selected row's task's."""
        attempts = self._attempts()
        if self.only_running:
            return [r for r in attempts if r.state in ("running", "evaluating")][:MAX_PANES]
        if self.task_id is None:
            row = self.selected_row()
            self.task_id = (
                row.task
                if row is not None and any(a.task == row.task for a in attempts)
                else next(iter(self._tasks()), None)
            )
        return [r for r in attempts if r.task == self.task_id][:MAX_PANES]

    async def _rebuild(self, rows: list[Row]) -> None:
        panes = self.query_one("#panes", Horizontal)
        await panes.remove_children()
        await panes.mount_all(
            [TranscriptPane(r.key, f"{r.agent} · {r.task} · {r.device} [{r.key}]") for r in rows]
        )
        self.shown = tuple(r.key for r in rows)

    async def redraw(self) -> None:  # type: ignore[override]
        rows = self._choose()
        if tuple(r.key for r in rows) != self.shown:
            await self._rebuild(rows)
        what = "running attempts" if self.only_running else f"task {self.task_id}"
        title = (
            f"{what}: {len(rows)} agents"
            if rows
            else "no agent attempts in this run (a run file with `agents:` has them)"
        )
        self.query_one("#transcripts-title", Static).update(title)
        self._sync()

    def _sync(self, rewrite: bool = False) -> None:
        for pane in self.query(TranscriptPane):
            pane.sync(self.model.transcript(pane.attempt_id), self.folded, rewrite)

    def resumed(self) -> None:
        row = self.model.rows.get(self.arena.selected) if self.arena.selected else None
        if row and row.kind == "attempt" and row.key not in self.shown:
            self.task_id, self.only_running = (
                row.task,
                False,
            )  # opened on a row (t in the queue): its task

    async def _step_task(self, step: int) -> None:
        tasks = self._tasks()
        if not tasks:
            return
        i = tasks.index(self.task_id) if self.task_id in tasks else -step
        self.task_id, self.only_running = tasks[(i + step) % len(tasks)], False
        await self.redraw()

    async def action_next_task(self) -> None:
        await self._step_task(1)

    async def action_previous_task(self) -> None:
        await self._step_task(-1)

    async def action_running(self) -> None:
        self.only_running = True
        await self.redraw()

    def action_fold(self) -> None:
        self.folded = not self.folded
        self._sync(rewrite=True)
