"""The queue: every evaluation and agent attempt of the run, live; sort and filter."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import DataTable, Header, Input, Static

from arena_tui.app.keys import Key, bindings, commands
from arena_tui.app.model import Row
from arena_tui.app.queue_rows import COLUMNS, SORTS, Filter, fitted_cells, interpreted, visible
from arena_tui.app.screens.base import ROW_KEYS, RowActions, RunScreen
from arena_tui.app.widgets.footer import ArenaFooter
from arena_tui.figures import INTERPRETED, INTERPRETED_CELL


class QueueScreen(RowActions, RunScreen):
    AUTO_FOCUS = "#queue"  # the table, not the filter box: keys are commands until `/`
    KEYS = (
        Key(
            "s",
            "sort",
            "Sort",
            "Sort queue",
            "cycle the sort order: plan, state, task, agent, device, speedup",
        ),
        Key("r", "reverse", "Reverse", "Reverse queue order", "reverse the sort order"),
        Key(
            "slash",
            "filter",
            "Filter",
            "Filter queue",
            "type state:, agent:, family:, device: or words",
        ),
        Key(
            "escape",
            "clear_filter",
            "Clear filter",
            "Clear queue filter",
            "show every row",
            show=False,
        ),
        Key(
            "enter", "scores", None, "Open scores of the selected row", "stage-by-stage results"
        ),  # the table's
        Key(
            "t",
            "transcripts",
            "Transcripts",
            "Open transcripts of the selected task",
            "agents side by side",
        ),
        Key("e", "triage", "Triage", show=False),
        *ROW_KEYS,
    )
    BINDINGS: ClassVar[list[BindingType]] = bindings(KEYS)
    COMMANDS_HERE = commands(KEYS)

    def __init__(self) -> None:
        super().__init__()
        self.sort_index = 0
        self.reverse = False
        self.filter = Filter()
        self._shown: list[str] = []
        self._cells: dict[str, tuple] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            placeholder="/ filter: state:failed agent:ref family:gemm device:cpu, or words",
            id="filter",
        )
        yield DataTable(id="queue", cursor_type="row", zebra_stripes=True)
        yield Static(id="queue-status")
        yield ArenaFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        table.focus()
        self.redraw()

    def redraw(self) -> None:
        table = self.query_one(DataTable)
        rows = visible(list(self.model.rows.values()), self.filter, self.sort_index, self.reverse)
        now = self.model.clock()
        keys = [r.key for r in rows]
        fitted = dict(zip(keys, fitted_cells(rows, now, self.size.width or 80)))
        if keys != self._shown:
            # Rows came, went or moved: rebuild, keeping the cursor on the same row.
            current = self._cursor_key()
            table.clear()
            self._cells = {}
            for row in rows:
                self._cells[row.key] = fitted[row.key]
                table.add_row(*self._cells[row.key], key=row.key)
            self._shown = keys
            if current in keys:
                table.move_cursor(row=keys.index(current), animate=False)
        else:
            # Same rows: update only the cells that changed (cheap under a stream of events).
            for row in rows:
                new = fitted[row.key]
                old = self._cells.get(row.key, ())
                for col, before, after in zip(COLUMNS, old, new):
                    if before != after:
                        table.update_cell(row.key, col, after, update_width=True)
                self._cells[row.key] = new
        sort_name = SORTS[self.sort_index][0] + (" (reversed)" if self.reverse else "")
        counts = "  ".join(f"{state} {n}" for state, n in sorted(self.model.counts().items()))
        shown = (
            f"{len(rows)} of {len(self.model.rows)} shown" if self.filter else f"{len(rows)} rows"
        )
        note = f" · {INTERPRETED_CELL} = {INTERPRETED}" if any(interpreted(r) for r in rows) else ""
        beating = self._beating(rows)
        self.query_one("#queue-status", Static).update(
            (f"{beating}\n" if beating else "") + f"{shown} · sort: {sort_name} · {counts}{note}"
        )

    def _beating(self, rows: list[Row]) -> str:
        """The highlighted row's running stage, else the first running one's: which stage, which
        workload, how long so far and its limit (the engine's heartbeat, at most 10 s old)."""
        key = self._cursor_key()
        chosen = self.model.rows.get(key) if key else None
        if chosen is None or not chosen.heartbeat:
            chosen = next((r for r in rows if r.heartbeat), None)
        return f"{chosen.label} {chosen.task}: {chosen.heartbeat}" if chosen else ""

    def on_resize(self) -> None:
        self._shown = []  # the task column's width follows the screen's
        self.redraw()

    def _cursor_key(self) -> str | None:
        table = self.query_one(DataTable)
        if not self._shown or table.cursor_row is None or table.cursor_row >= len(self._shown):
            return None
        return self._shown[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            self.arena.selected = event.row_key.value

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.arena.show_row(event.row_key.value, "scores")

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter = Filter.parse(event.value)
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.redraw()

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self.redraw()

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""
        self.filter = Filter()
        self.query_one(DataTable).focus()
        self.redraw()

    def row_for_action(self) -> Row | None:
        key = self._cursor_key()
        return self.model.rows.get(key) if key else None

    def action_scores(self) -> None:
        key = self._cursor_key()
        if key:
            self.arena.show_row(key, "scores")

    def action_transcripts(self) -> None:
        key = self._cursor_key()
        if key:
            self.arena.show_row(key, "transcripts")

    def action_triage(self) -> None:
        key = self._cursor_key()
        if key:
            self.arena.show_row(key, "triage")
