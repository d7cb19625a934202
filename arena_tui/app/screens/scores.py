"""Scores: the selected row's results stage by stage, per workload, with a speedup chart."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Header, Static

from arena_tui.app.screens.base import RunScreen
from arena_tui.app.widgets.footer import ArenaFooter
from arena_tui.app.widgets.score_card import score_card


class ScoresScreen(RunScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "next_row", "Next"),
        Binding("p", "previous_row", "Prev"),
    ]
    COMMANDS_HERE = (
        ("Scores of the next row", "the next evaluation or attempt in the queue (n)", "next_row"),
        ("Scores of the previous row", "the previous evaluation or attempt (p)", "previous_row"),
    )

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="scores-scroll"):
            yield Static(id="scores")
        yield ArenaFooter()

    def redraw(self) -> None:
        self.query_one("#scores", Static).update(score_card(self.selected_row()))

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
