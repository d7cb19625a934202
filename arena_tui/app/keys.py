"""A screen's keys declared once: each gives its binding (the footer) and its entry in the
command palette (ctrl+p), so the palette always names the key that is bound to the action."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual.binding import Binding, BindingType

# How the palette writes a key whose Textual name is a word.
SHOWN = {"slash": "/", "question_mark": "?"}


@dataclass(frozen=True)
class Key:
    key: str  # Textual's key name: "s", "slash", "escape", "enter"
    action: str  # the screen's action_<name>
    label: str | None = None  # the footer's word; None: bound elsewhere (a table's enter)
    title: str | None = None  # the palette's entry; None: not in the palette
    help: str = ""  # the palette's line, followed by the key
    show: bool = True  # shown in the footer


def bindings(keys: Iterable[Key]) -> list[BindingType]:
    return [Binding(k.key, k.action, k.label, show=k.show) for k in keys if k.label is not None]


def commands(keys: Iterable[Key]) -> tuple[tuple[str, str, str], ...]:
    """(palette title, help, action name), as RunScreen.COMMANDS_HERE holds them."""
    return tuple(
        (k.title, f"{k.help} ({SHOWN.get(k.key, k.key)})", k.action)
        for k in keys
        if k.title is not None
    )
