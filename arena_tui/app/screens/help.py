"""The help screen: every screen and key in one place (docs/app.md says the same)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# Kernel Arena — keys

| key | everywhere |
| --- | --- |
| `1` … `5` | queue, transcripts, scores, leaderboard, triage |
| `ctrl+p` | command palette: every action by name |
| `x` | cancel the run (resumable: `arena run --resume RUN`) |
| `?` | this help · `q` quit (cancels a running run first) |

| screen | keys |
| --- | --- |
| queue | `s` sort · `r` reverse · `/` filter (`state:` `agent:` `family:` `device:`, or words) · `escape` clear · `enter` scores · `t` transcripts · `e` triage · the triage keys below |
| transcripts | `n`/`p` next/previous task · `a` running attempts · `z` fold/unfold long outputs |
| scores | `n`/`p` next/previous row |
| leaderboard | `a` this run / every run in the store |
| triage | `e` open the candidate in `$EDITOR` · `i` mark (unmark) an infrastructure fault, with a note (kept) · `R` re-run with the stored seed · `D` requeue on another device · `c` cancel the attempt |

Press `escape` to close.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)
