"""`arena leaderboard`: agents and their models ranked per task family and device, one table per
timing kind (core/leaderboard.py; docs/leaderboard.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from core.leaderboard import DEFAULT_P, GROUP_BY, TIMING_KINDS, Board, LeaderboardError, board, boards
from core.result import EXIT_BAD_INPUT, EXIT_PASSED
from core.store import Store

from .render import ratio
from .runs_cmd import _guarded


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("leaderboard", help="agents and models ranked per task family and device, one board per timing kind")
    p.add_argument("--device", metavar="MODEL_OR_ID", help="one device: its model (`H200`, `NVIDIA H200`) or its id (`cuda:0`, `box1/cuda:0`)")
    p.add_argument("--vendor", help="one vendor's devices: nvidia, amd, intel, cpu")
    p.add_argument("--family", help="one task family: gemm, attention, moe, norm, ...")
    p.add_argument("--run", metavar="RUN", help="one run's results only (an id, or a unique prefix of one)")
    p.add_argument("--timing", choices=TIMING_KINDS, help="one timing kind's board only (default: one board per kind present)")
    p.add_argument("--p", type=float, default=DEFAULT_P, metavar="P", help=f"fast_p counts results faster than P × the baseline (default {DEFAULT_P:g})")
    p.add_argument("--by", choices=GROUP_BY, default="model", help="group devices by model (default) or by vendor")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.add_argument("--html", type=Path, metavar="FILE", help="write the leaderboard page as one self-contained HTML file: every board, opened on --family/--device/--vendor")
    p.set_defaults(func=_leaderboard)


@_guarded
def _leaderboard(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.html is not None:
        return _html(store, args, out, err)
    filters = {"device": args.device, "vendor": args.vendor, "family": args.family, "run": args.run}
    try:
        if args.timing:
            found = {args.timing: board(store, timing_kind=args.timing, p=args.p, by=args.by, **filters)}
            found = {k: b for k, b in found.items() if b.entries or b.infrastructure_errors}
        else:
            found = boards(store, p=args.p, by=args.by, **filters)
    except LeaderboardError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    if args.json:
        out.print_json(json.dumps({"p": args.p, "by": args.by, "filters": filters, "boards": {k: b.to_json() for k, b in found.items()}}))
        return EXIT_PASSED
    if not found:
        given = ", ".join(f"--{k} {v}" for k, v in {**filters, "timing": args.timing}.items() if v is not None)
        if given:
            out.print(f"no results match {escape(given)}: `arena leaderboard` alone shows every board", highlight=False)
        else:
            out.print(f"no results yet in {escape(str(store.path))}: `arena run` or `arena eval` adds some", highlight=False)
        return EXIT_PASSED
    for i, b in enumerate(found.values()):
        if i:
            out.print()
        render(out, b)
    return EXIT_PASSED


def _html(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    """A static snapshot of the web page (arena_tui/web/snapshot.py); the page filters itself."""
    from .web.snapshot import write_snapshot

    try:
        filters = {"family": args.family, "device": args.device, "vendor": args.vendor}
        entries = write_snapshot(store, args.html, args.p, args.by, args.tasks_dir, filters)
    except LeaderboardError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    except OSError as exc:
        err.print(f"[red]error:[/] cannot write {escape(str(args.html))}: {escape(exc.strerror or str(exc))}; give a writable --html FILE", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    out.print(f"wrote {escape(str(args.html))}: {entries} entries; open it in a browser (filters work offline)", highlight=False)
    return EXIT_PASSED


def render(out: Console, b: Board) -> None:
    """One board as a table, a section per (family, device), then what the numbers mean."""
    table = Table(title=f"[bold]{escape(b.label)}[/]", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, padding=(0, 1, 0, 0) if out.width >= 110 else 0)  # the box adds one space between columns
    table.add_column("rank", justify="right", no_wrap=True)
    for col in ("agent", "model", "family", "vendor" if b.by == "vendor" else "device"):  # these fold on a narrow terminal
        table.add_column(col, overflow="fold", min_width=6)
    for col in ("speedup", f"fast_{b.p:g}", "SOL", "correct", "results", "violations"):
        table.add_column(col, justify="right", no_wrap=True)
    for n, (_family, _device, entries) in enumerate(b.groups()):
        if n:
            table.add_section()
        for e in entries:
            table.add_row(
                "–" if e.rank is None else str(e.rank), escape(e.agent), escape(e.model or "–"), e.family, escape(e.device),
                ratio(e.speedup), "–" if e.fast_p is None else f"{e.fast_p * 100:.0f}%",
                "–" if e.sol_fraction is None else f"{e.sol_fraction * 100:.1f}%", f"{e.correct * 100:.0f}%", str(e.results),
                f"[red]{e.violations}[/]" if e.violations else "0",
            )
    out.print(table)
    notes = ["speedup: geometric mean over results, a failed result counts 1.0 (the baseline stays)"]
    if b.ranked:
        notes.append(f"fast_{b.p:g}: correct and faster than {b.p:g}× the baseline; an entry with integrity violations ranks last")
    if b.infrastructure_errors:
        notes.append(f"{b.infrastructure_errors} infrastructure errors left out")
    out.print("[dim]" + escape("; ".join(notes)) + "[/]", highlight=False)
