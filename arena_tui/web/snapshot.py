"""`arena leaderboard --html FILE`: the leaderboard page as one self-contained file — the same
page, style and script the server sends, inlined, with the boards and every result's public
view embedded — that can be published anywhere (no server, no network: filters and details
work; live updates do not)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from arena_tui.web.board import boards_json, results_json
from core.store.db import Store

STATIC = Path(__file__).resolve().parent / "static"


def _inline_json(data: object) -> str:
    # `</` would end the script element early; `<!--` could start an HTML comment in it.
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\!--")


def initial_filters(
    choices: dict[str, list[str]], family: str | None, device: str | None, vendor: str | None
) -> dict[str, str]:
    """The page's filters that `--family/--device/--vendor` name, as the page's choices spell
    them (`--device h200` picks "NVIDIA H200", as `arena leaderboard` matches it)."""
    out: dict[str, str] = {}
    if family in choices["family"]:
        out["family"] = family  # type: ignore[assignment]
    if vendor:
        spelled = [v for v in choices["vendor"] if v.casefold() == vendor.casefold()]
        if spelled:  # the vendor as the store spells it
            out["vendor"] = spelled[-1]
    if device:
        words = device.casefold().split()
        found = [
            d
            for d in choices["device"]
            if d == device or all(w in d.casefold().split() for w in words)
        ]
        if len(found) == 1:
            out["device"] = found[0]
    return out


def snapshot_html(
    store: Store,
    p: float,
    by: str,
    tasks_dir: Path | None = None,
    filters: dict[str, str | None] | None = None,
) -> tuple[str, int]:
    """The page, and how many entries its boards hold; `filters` are the ones it opens with."""
    page = (STATIC / "leaderboard.html").read_text()
    css = (STATIC / "leaderboard.css").read_text()
    js = (STATIC / "leaderboard.js").read_text().replace("</script", "<\\/script")
    boards = boards_json(store, p, by)
    f = filters or {}
    data = {
        "boards": boards,
        "results": results_json(store, tasks_dir),
        "filters": initial_filters(
            boards["choices"], f.get("family"), f.get("device"), f.get("vendor")
        ),
        "taken_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    replacements = {
        '<link rel="stylesheet" href="static/leaderboard.css">': f"<style>\n{css}</style>",
        '<script src="static/leaderboard.js"></script>': f"<script>\n{js}</script>",
        "<!-- arena:data -->": f'<script id="arena-data" type="application/json">{_inline_json(data)}</script>',
        '<span class="api"><a href="docs">API</a></span>': "",
    }
    for old, new in replacements.items():
        if old not in page:
            raise RuntimeError(
                f"arena_tui/web/static/leaderboard.html lost its `{old}` line, which the snapshot replaces"
            )
        page = page.replace(old, new)
    return page, sum(len(b["entries"]) for b in boards["boards"].values())


def write_snapshot(
    store: Store,
    path: Path,
    p: float,
    by: str,
    tasks_dir: Path | None = None,
    filters: dict[str, str | None] | None = None,
) -> int:
    """Write the snapshot (atomically); returns how many entries it holds."""
    html, entries = snapshot_html(store, p, by, tasks_dir, filters)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html)
    tmp.replace(path)
    return entries
