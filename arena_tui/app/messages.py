"""Every custom message of the app, in one place."""

from __future__ import annotations

from textual.message import Message


class RunUpdated(Message):
    """The run model changed (a coalesced batch of engine events, or the clock ticked while
    something runs). Pending ones collapse into one: a screen redraws once per burst."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunUpdated)
