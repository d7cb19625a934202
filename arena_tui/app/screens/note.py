"""A one-line note from the user (why a result is marked an infrastructure fault)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class NoteScreen(ModalScreen[str | None]):
    """`enter` returns the text (empty allowed), `escape` returns None (nothing is done)."""

    AUTO_FOCUS = "#note-text"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(id="note"):
            yield Label(self.prompt)
            yield Input(placeholder="a note (enter to confirm, escape to cancel)", id="note-text")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
