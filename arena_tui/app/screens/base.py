"""What every run screen shares: the header, the footer and access to the app's model."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from textual.screen import Screen

from arena_tui.app.keys import Key
from arena_tui.app.messages import RunUpdated
from arena_tui.app.model import Row, RunModel
from arena_tui.app.screens.note import NoteScreen

if TYPE_CHECKING:
    from arena_tui.app.app import ArenaApp


# Triage on the selected row, the same keys on the queue and triage screens.
ROW_KEYS = (
    Key(
        "c",
        "cancel_attempt",
        "Cancel attempt",
        "Cancel the selected attempt",
        "stop its agent, recorded cancelled; the run goes on",
    ),
    Key(
        "R",
        "rerun",
        "Re-run (seed)",
        "Re-run with the stored seed",
        "evaluate the candidate again: same device, same hidden workloads and inputs",
    ),
    Key(
        "D",
        "requeue",
        "Requeue",
        "Requeue on another device",
        "evaluate the candidate again on the run's next device, a fresh seed",
    ),
    Key(
        "i",
        "mark_infrastructure",
        "Mark infra",
        "Mark infrastructure fault",
        "mark or unmark the result, with a note; kept in the store, off the leaderboard",
    ),
)


class RowActions:
    """The triage keys' actions on `row_for_action()`: the highlighted row of the screen."""

    def row_for_action(self) -> Row | None:
        raise NotImplementedError

    def action_cancel_attempt(self) -> None:
        self.arena.cancel_attempt(self.row_for_action())  # type: ignore[attr-defined]

    def action_rerun(self) -> None:
        self.arena.rerun(self.row_for_action())  # type: ignore[attr-defined]

    def action_requeue(self) -> None:
        self.arena.requeue(self.row_for_action())  # type: ignore[attr-defined]

    def action_mark_infrastructure(self) -> None:
        row = self.row_for_action()
        arena = self.arena  # type: ignore[attr-defined]
        if row is not None and row.marked_infrastructure:
            arena.mark_infrastructure(row, "")
            return

        def done(note: str | None) -> None:
            if note is not None:
                arena.mark_infrastructure(row, note or "marked in the app")

        arena.push_screen(
            NoteScreen(f"why is {row.key if row else 'this'} an infrastructure fault?"), done
        )


class RunScreen(Screen):
    # (palette title, help, action name): the command palette lists these while the screen shows.
    COMMANDS_HERE: tuple[tuple[str, str, str], ...] = ()

    @property
    def arena(self) -> ArenaApp:
        return cast("ArenaApp", self.app)

    @property
    def model(self) -> RunModel:
        return self.arena.model

    def selected_row(self) -> Row | None:
        key = self.arena.selected
        if key is None or key not in self.model.rows:
            return next(iter(self.model.rows.values()), None)
        return self.model.rows[key]

    def redraw(self) -> Awaitable[None] | None:
        """Show the model as it is now (a screen that mounts widgets to do so may be async)."""

    def resumed(self) -> None:
        """The screen is shown again: follow the selection if it should."""

    async def _redraw(self) -> None:
        result = self.redraw()
        if inspect.isawaitable(result):
            await result

    async def on_run_updated(self, message: RunUpdated) -> None:
        await self._redraw()

    async def on_screen_resume(self) -> None:
        self.resumed()
        await self._redraw()
