"""One agent's transcript as a scrolling pane; several sit side by side."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import RichLog, Static

from arena_tui.app.widgets.transcript_text import step_text
from core.model.events import TranscriptEvent

LOG_LINES = 2000  # the pane forgets older lines; the store keeps every step


class TranscriptPane(Vertical):
    def __init__(self, attempt_id: str, title: str) -> None:
        super().__init__(classes="transcript-pane")
        self.attempt_id = attempt_id
        self.title = title
        self.last_seq = 0

    def compose(self) -> ComposeResult:
        yield Static(self.title, classes="pane-title")
        yield RichLog(
            max_lines=LOG_LINES, wrap=True, markup=False, highlight=False, auto_scroll=True
        )

    def sync(self, steps: list[TranscriptEvent], folded: bool, rewrite: bool = False) -> int:
        """Write the steps not written yet (all of them when `rewrite`); returns how many."""
        log = self.query_one(RichLog)
        if rewrite:
            log.clear()
            self.last_seq = 0
        new = [s for s in steps if s.seq > self.last_seq]
        for step in new:
            log.write(step_text(step, folded))
        if new:
            self.last_seq = new[-1].seq
        return len(new)
