"""Scores: the selected row's results stage by stage, per workload, with a speedup chart."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import Header, Static

from arena_tui.app.keys import Key, bindings, commands
from arena_tui.app.screens.base import RunScreen
from arena_tui.app.widgets.footer import ArenaFooter
from arena_tui.app.widgets.score_card import score_card


class ScoresScreen(RunScreen):
    KEYS = (
        Key(
            "n",
            "next_row",
            "Next",
            "Scores of the next row",
            "the next evaluation or attempt in the queue",
        ),
        Key(
            "p",
            "previous_row",
            "Prev",
            "Scores of the previous row",
            "the previous evaluation or attempt",
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = bindings(KEYS)
    COMMANDS_HERE = commands(KEYS)

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="scores-scroll"):
            yield Static(id="scores")
        yield ArenaFooter()

    def redraw(self) -> None:
        width = max(40, self.size.width - 2)  # the vertical scrollbar's share
        self.query_one("#scores", Static).update(score_card(self.selected_row(), width))

    def on_resize(self) -> None:
        self.redraw()  # the tables are fitted to the width

    def _step(self, step: int) -> None:
        keys = list(self.model.rows)
        if not keys:
            return
        row = self.selected_row()
        i = keys.index(row.key) if row is not None else 0
        self.arena.selected = keys[(i + step) % len(keys)]
        self.redraw()

    def action_next_row(self) -> None:
        self._step(1)

    def action_previous_row(self) -> None:
        self._step(-1)
