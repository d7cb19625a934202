"""Leaderboard: core/store/leaderboard.py's boards, one per timing kind, redrawn as results land."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import Header, Static

from arena_tui.app.keys import Key, bindings, commands
from arena_tui.app.screens.base import RunScreen
from arena_tui.app.widgets.footer import ArenaFooter
from arena_tui.figures import INTERPRETED_NOTE, entry_cells, rank_cell
from arena_tui.tables import Col, fitted
from core.store import leaderboard


def board_table(board: leaderboard.Board, width: int = 200) -> Table:
    """The board as the CLI draws it (leaderboard_cmd.render's columns), fitted to the pane."""
    C = Col
    flags = [_flags(e) for e in board.entries]
    # flags (violations, failures, starters) go first on a narrow pane, unless an entry has one: then they are the news
    cols = [
        C("#", number=True),
        C("agent"),
        C("model", drop=2),
        C("family", drop=1),
        C("device"),
        C("speedup", number=True),
        C(f"fast_{board.p:g}", number=True),
        C("SOL", number=True),
        C("correct", number=True),
        C("results", number=True, drop=3),
        C("flags", drop=0 if any(flags) else 4),
    ]
    rows = [
        [
            rank_cell(e),
            escape(e.agent),
            escape(e.model or ""),
            e.family,
            escape(e.device),
            *entry_cells(board.timing_kind, e),  # as leaderboard_cmd.render
            str(e.results),
            flag,
        ]
        for e, flag in zip(board.entries, flags)
    ]
    table = fitted(width, cols, rows, title=f"{escape(board.label)}", title_justify="left")
    notes = (
        [f"{board.infrastructure_errors} infrastructure errors left out"]
        if board.infrastructure_errors
        else []
    )
    if board.ranked and any(e.rank is None for e in board.entries):
        notes.append("rank –: no correct result, never ranked above a correct one")
    if board.timing_kind == "cpu":
        notes.append(INTERPRETED_NOTE)
    if notes:
        table.caption = "; ".join(notes)
    return table


def _flags(e: leaderboard.Entry) -> str:
    """Violations, failures (failed results and attempts with nothing to score) and unchanged
    starters, said in words (markup)."""
    parts = [f"{e.violations} violations"] * bool(e.violations) + [f"{e.unscored} failures"] * bool(
        e.unscored
    )
    text = f"[red]{', '.join(parts)}[/]" if parts else ""
    if e.starters:
        text += (", " if parts else "") + f"[yellow]{e.starters} starter[/]"
    return text


def boards_view(store, run: str | None, width: int = 200) -> RenderableType:  # type: ignore[no-untyped-def]
    boards = leaderboard.boards(store, run=run)
    if not boards:
        return Text("no results yet: the boards fill as evaluations finish", style="dim")
    return Group(*(part for b in boards.values() for part in (board_table(b, width), Text(""))))


class LeaderboardScreen(RunScreen):
    KEYS = (
        Key(
            "a",
            "scope",
            "This run/all runs",
            "Leaderboard scope",
            "this run's results, or every run in the store",
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = bindings(KEYS)
    COMMANDS_HERE = commands(KEYS)

    def __init__(self) -> None:
        super().__init__()
        self.all_runs = False
        self._drawn_version = -1

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="board-scope")
        with VerticalScroll():
            yield Static(id="boards")
        yield ArenaFooter()

    def redraw(self, force: bool = False) -> None:
        # The boards are a store query: rebuild them only when the model moved.
        if not force and self._drawn_version == self.model.results_version:
            return
        self._drawn_version = self.model.results_version
        scope = "every run in the store" if self.all_runs else f"run {self.model.run_id}"
        self.query_one("#board-scope", Static).update(
            f"scope: {scope} (a toggles) · timing kinds are never mixed"
        )
        width = max(40, self.size.width - 2)  # the vertical scrollbar's share
        self.query_one("#boards", Static).update(
            boards_view(self.model.store, None if self.all_runs else self.model.run_id, width)
        )

    def on_resize(self) -> None:
        self.redraw(force=True)  # the columns are chosen for the width

    def action_scope(self) -> None:
        self.all_runs = not self.all_runs
        self.redraw(force=True)
