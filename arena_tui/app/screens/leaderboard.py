"""Leaderboard: core/leaderboard.py's boards, one per timing kind, redrawn as results land."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from core import leaderboard

from ..queue_rows import ratio_text
from .base import RunScreen


def board_table(board: leaderboard.Board) -> Table:
    table = Table(title=f"{board.label}", title_justify="left", header_style="bold", show_edge=False)
    for col in ("#", "agent", "model", "family", "device", "speedup", f"fast_{board.p:g}", "SOL", "correct", "results", "flags"):
        table.add_column(col, justify="right" if col in ("#", "speedup", "SOL", "correct", "results") else "left", no_wrap=True)
    for e in board.entries:
        table.add_row(
            str(e.rank) if e.rank is not None else "·", e.agent, e.model or "", e.family, e.device, ratio_text(e.speedup),
            f"{e.fast_p * 100:.0f}%" if e.fast_p is not None else "–", f"{e.sol_fraction * 100:.1f}%" if e.sol_fraction is not None else "–",
            f"{e.correct * 100:.0f}%", str(e.results), _flags(e),
        )
    if board.infrastructure_errors:
        table.caption = f"{board.infrastructure_errors} infrastructure errors left out"
    return table


def _flags(e: leaderboard.Entry) -> Text | str:
    """Violations, failures (attempts with nothing to score) and unchanged starters, said in words."""
    parts = [f"{e.violations} violations"] * bool(e.violations) + [f"{e.failures} failures"] * bool(e.failures)
    text = Text(", ".join(parts), style="red") if parts else Text("")
    if e.starters:
        text.append((", " if parts else "") + f"{e.starters} starter", style="yellow")
    return text if parts or e.starters else ""


def boards_view(store, run: str | None) -> RenderableType:  # type: ignore[no-untyped-def]
    boards = leaderboard.boards(store, run=run)
    if not boards:
        return Text("no results yet: the boards fill as evaluations finish", style="dim")
    return Group(*(part for b in boards.values() for part in (board_table(b), Text(""))))


class LeaderboardScreen(RunScreen):
    BINDINGS = [Binding("a", "scope", "This run/all runs")]
    COMMANDS_HERE = (("Leaderboard scope", "this run's results, or every run in the store (a)", "scope"),)

    def __init__(self) -> None:
        super().__init__()
        self.all_runs = False
        self._drawn_version = -1

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="board-scope")
        with VerticalScroll():
            yield Static(id="boards")
        yield Footer()

    def redraw(self, force: bool = False) -> None:
        # The boards are a store query: rebuild them only when the model moved.
        if not force and self._drawn_version == self.model.results_version:
            return
        self._drawn_version = self.model.results_version
        scope = "every run in the store" if self.all_runs else f"run {self.model.run_id}"
        self.query_one("#board-scope", Static).update(f"scope: {scope} (a toggles) · timing kinds are never mixed")
        self.query_one("#boards", Static).update(boards_view(self.model.store, None if self.all_runs else self.model.run_id))

    def action_scope(self) -> None:
        self.all_runs = not self.all_runs
        self.redraw(force=True)
