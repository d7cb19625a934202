"""What every run screen shares: the header, the footer and access to the app's model."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from textual.screen import Screen

from ..messages import RunUpdated
from ..model import Row, RunModel

if TYPE_CHECKING:
    from ..app import ArenaApp


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
