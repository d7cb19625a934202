"""The footer every screen shows: help and quit first, so that at 80 columns (where the row of
keys is cut at the right) they are always on screen; then the screen's own keys, then the rest.
Every key stays in the help screen (`?`) and the command palette (ctrl+p)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

FIRST = ("help", "quit")  # actions whose keys lead the footer
LAST = ("switch_mode",)  # the screen keys 1-5: the header says which screen this is


class ArenaFooter(Footer):
    def __init__(self) -> None:
        super().__init__(show_command_palette=False, compact=True)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        shown: dict[str, tuple] = {}
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:
                shown.setdefault(binding.action, (binding, enabled, tooltip))

        def order(action: str) -> int:
            name = action.split("(")[0]
            return 0 if name in FIRST else 2 if name in LAST else 1

        keys = sorted(
            shown.items(), key=lambda kv: order(kv[0])
        )  # a stable sort: the screen's order within each
        self.styles.grid_size_columns = len(keys)
        for action, (binding, enabled, tooltip) in keys:
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                action,
                disabled=not enabled,
                tooltip=tooltip or binding.description,
            ).data_bind(compact=Footer.compact)
