"""One transcript step as Rich text: prose plain, tool calls and results marked apart, long
outputs folded to their first lines (the store keeps them whole: `arena runs transcript --full`)."""

from __future__ import annotations

import json

from rich.text import Text

from core.model.events import TranscriptEvent

FOLD_LINES = 6  # a tool result longer than this shows its first lines and a count


def _fold(text: str, folded: bool) -> str:
    lines = text.rstrip().splitlines()
    if not folded or len(lines) <= FOLD_LINES + 1:
        return "\n".join(lines)
    return "\n".join(lines[:FOLD_LINES] + [f"… {len(lines) - FOLD_LINES} more lines (z unfolds)"])


def step_text(event: TranscriptEvent, folded: bool = True) -> Text:
    """What a transcript pane shows for one step."""
    if event.kind == "tool_call":
        args = json.dumps(event.arguments, ensure_ascii=False) if event.arguments else ""
        text = Text("▶ ", style="bold cyan")
        text.append(event.tool or "tool", style="bold cyan")
        text.append(" " + _fold(args, folded), style="cyan")
        return text
    if event.kind == "tool_result":
        style = "red" if event.is_error else "green"
        text = Text("◀ " + ("error" if event.is_error else "result") + "\n", style=f"bold {style}")
        text.append(_fold(event.text or "", folded), style="dim")
        return text
    if event.kind == "thinking":
        return Text("… " + _fold(event.text or "", folded), style="italic dim")
    if event.kind == "usage":
        cost = f" ${event.cost_usd:.3f}" if event.cost_usd is not None else ""
        return Text(
            f"Σ tokens in {event.input_tokens or 0} out {event.output_tokens or 0}{cost}",
            style="dim magenta",
        )
    if event.kind == "final":
        return Text("■ " + _fold(event.text or "done", folded), style="bold")
    if event.kind == "error":
        return Text("✗ " + (event.text or "error"), style="bold red")
    return Text(_fold(event.text or "", folded))
