"""Triage: failed rows grouped by failure kind; the error, compiler output and the diff of the
candidate against the starter; open it in $EDITOR, mark an infrastructure fault (kept in the
store), re-run it with its stored seed, requeue it on another device, cancel one attempt."""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import ClassVar

from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Header, OptionList, Static
from textual.widgets.option_list import Option

from arena_tui.app.keys import Key, bindings, commands
from arena_tui.app.model import Row
from arena_tui.app.screens.base import ROW_KEYS, RowActions, RunScreen
from arena_tui.app.triage import candidate_diff, error_text, failure_kind, grouped
from arena_tui.app.widgets.footer import ArenaFooter


class TriageScreen(RowActions, RunScreen):
    KEYS = (
        Key(
            "e",
            "edit",
            "Open in $EDITOR",
            "Open candidate in $EDITOR",
            "suspend the app and edit the failed candidate",
        ),
        *ROW_KEYS,
    )
    BINDINGS: ClassVar[list[BindingType]] = bindings(KEYS)
    COMMANDS_HERE = commands(KEYS)

    def __init__(self) -> None:
        super().__init__()
        self._listed: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield OptionList(id="failures")
            with VerticalScroll(id="failure-detail"):
                yield Static(id="failure")
        yield ArenaFooter()

    def redraw(self) -> None:
        groups = grouped(list(self.model.rows.values()))
        listed: list[str | None] = []
        options: list[Option] = []
        for kind, rows in groups.items():
            options.append(Option(Text(f"{kind} ({len(rows)})", style="bold"), disabled=True))
            listed.append(None)
            for row in rows:
                options.append(
                    Option(f"  {row.label} {row.task} · {row.agent} · {row.device}", id=row.key)
                )
                listed.append(row.key)
        failures = self.query_one(OptionList)
        if listed != self._listed:
            keep = self.arena.selected
            failures.clear_options()
            failures.add_options(options)
            self._listed = listed
            if keep in listed:
                failures.highlighted = listed.index(keep)
            elif any(listed):
                failures.highlighted = next(i for i, k in enumerate(listed) if k)
        self._show_detail()

    def _current(self) -> Row | None:
        failures = self.query_one(OptionList)
        if failures.highlighted is None or failures.highlighted >= len(self._listed):
            return None
        key = self._listed[failures.highlighted]
        return self.model.rows.get(key) if key else None

    def _show_detail(self) -> None:
        row = self._current()
        detail = self.query_one("#failure", Static)
        if row is None:
            detail.update(
                Text("no failures" if not any(self._listed) else "pick a failure", style="dim")
            )
            return
        kind = failure_kind(row) or "not failed"
        head = Text(f"{row.task} · {row.agent} · {row.device} [{row.key}] — {kind}", style="bold")
        diff = candidate_diff(row, self.arena.source.tasks_dir)
        detail.update(
            Group(
                head,
                Text(""),
                Text("error", style="bold red"),
                Text(error_text(row)),
                Text(""),
                Text("candidate against the starter", style="bold"),
                Syntax(diff, "diff", theme="ansi_dark", word_wrap=True),
            )
        )

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id:
            self.arena.selected = event.option.id
        self._show_detail()

    def action_edit(self) -> None:
        row = self._current()
        if row is None or not row.candidate:
            self.notify("no candidate file to open", severity="warning")
            return
        editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
        try:
            with self.app.suspend():  # the editor gets the terminal; the run goes on meanwhile
                subprocess.run([*editor, row.candidate], check=False)
        except SuspendNotSupported:  # headless (tests) or a web driver: run it without the terminal
            subprocess.run(
                [*editor, row.candidate], check=False, stdin=subprocess.DEVNULL, capture_output=True
            )
        self.arena.last_edited = row.candidate
        self._show_detail()

    def row_for_action(self) -> Row | None:
        return self._current()
