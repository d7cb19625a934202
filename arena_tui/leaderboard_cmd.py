"""`arena leaderboard`: agents and their models ranked per task family and device, one table per
timing kind (core/store/leaderboard.py; docs/leaderboard.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arena_tui.figures import INTERPRETED_NOTE, entry_cells, gap_cell, rank_cell
from arena_tui.runs_cmd import _guarded
from arena_tui.tables import Col, fitted
from core.model.result import EXIT_BAD_INPUT, EXIT_PASSED
from core.store.db import Store
from core.store.leaderboard import board, boards
from core.store.peer_scores import FAMILY as KB_FAMILY
from core.store.peer_scores import KERNELBENCH_P, PeerScore, kernelbench_scores
from core.store.standings import DEFAULT_P, GROUP_BY, TIMING_KINDS, Board, LeaderboardError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "leaderboard",
        help="agents and models ranked per task family and device, one board per timing kind",
    )
    p.add_argument(
        "--device",
        metavar="MODEL_OR_ID",
        help="one device: its model (`H200`, `NVIDIA H200`) or its id (`cuda:0`, `box1/cuda:0`)",
    )
    p.add_argument("--vendor", help="one vendor's devices: nvidia, amd, intel, cpu")
    p.add_argument("--family", help="one task family: gemm, attention, moe, norm, ...")
    p.add_argument(
        "--run", metavar="RUN", help="one run's results only (an id, or a unique prefix of one)"
    )
    p.add_argument(
        "--timing",
        choices=TIMING_KINDS,
        help="one timing kind's board only (default: one board per kind present)",
    )
    p.add_argument(
        "--p",
        type=float,
        default=DEFAULT_P,
        metavar="P",
        help=f"fast_p counts results faster than P × the baseline (default {DEFAULT_P:g})",
    )
    p.add_argument(
        "--by",
        choices=GROUP_BY,
        default="model",
        help="group devices by model (default) or by vendor",
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the tables"
    )
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write the leaderboard page as one self-contained HTML file: every board, opened on --family/--device/--vendor",
    )
    p.set_defaults(func=_leaderboard)


@_guarded
def _leaderboard(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.html is not None:
        return _html(store, args, out, err)
    filters = {"device": args.device, "vendor": args.vendor, "family": args.family, "run": args.run}
    try:
        if args.timing:
            found = {
                args.timing: board(store, timing_kind=args.timing, p=args.p, by=args.by, **filters)
            }
            found = {k: b for k, b in found.items() if b.entries or b.infrastructure_errors}
        else:
            found = boards(store, p=args.p, by=args.by, **filters)
    except LeaderboardError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    peers = (
        kernelbench_scores(store, args.run)
        if args.family in (None, KB_FAMILY) and args.timing in (None, "measured", "predicted")
        else []
    )
    if args.json:
        out.print_json(
            json.dumps(
                {
                    "p": args.p,
                    "by": args.by,
                    "filters": filters,
                    "boards": {k: b.to_json() for k, b in found.items()},
                    "kernelbench": [s.to_json() for s in peers],
                }
            )
        )
        return EXIT_PASSED
    if not found:
        given = ", ".join(
            f"--{k} {v}" for k, v in {**filters, "timing": args.timing}.items() if v is not None
        )
        if given:
            out.print(
                f"no results match {escape(given)}: `arena leaderboard` alone shows every board",
                highlight=False,
            )
        else:
            out.print(
                f"no results yet in {escape(str(store.path))}: `arena run` or `arena eval` adds some",
                highlight=False,
            )
        return EXIT_PASSED
    for i, b in enumerate(found.values()):
        if i:
            out.print()
        render(out, b)
    if any(s.timing_kind in ("measured", "predicted") for s in peers):
        out.print()
        render_kernelbench(out, [s for s in peers if s.timing_kind in ("measured", "predicted")])
    return EXIT_PASSED


def render_kernelbench(out: Console, scores: list[PeerScore]) -> None:
    """KernelBench's fast_p table (core/store/peer_scores.py says how it is computed)."""
    out.print(
        "[bold]KernelBench's own scores[/] on kernelbench/ tasks: fast_p = share of results correct and "
        "faster than p × the baseline at KernelBench's sizes (its score.py; hidden workloads must pass too)",
        highlight=False,
        soft_wrap=True,
    )
    cols = [
        Col("agent"),
        Col("device"),
        Col("baseline"),
        Col("n", number=True),
        *(Col(f"fast_{p:g}", number=True) for p in KERNELBENCH_P),
        Col("geomean (correct)", number=True),
    ]
    rows = [
        [
            escape(s.agent + (f" · {s.model}" if s.model else "")),
            escape(s.device + ("" if s.timing_kind == "measured" else f" ({s.timing_kind})")),
            escape(s.baseline_impl or "–"),
            str(s.samples),
            *(f"{s.fast_p[str(p)] * 100:.0f}%" for p in KERNELBENCH_P),
            f"{s.geomean_correct:.2f}×" if s.correct else "–",
        ]
        for s in scores
    ]
    out.print(fitted(out.width, cols, rows))


def _html(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    """A static snapshot of the web page (arena_tui/web/snapshot.py); the page filters itself."""
    from arena_tui.web.snapshot import write_snapshot

    try:
        filters = {"family": args.family, "device": args.device, "vendor": args.vendor}
        entries = write_snapshot(store, args.html, args.p, args.by, args.tasks_dir, filters)
    except LeaderboardError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    except OSError as exc:
        err.print(
            f"[red]error:[/] cannot write {escape(str(args.html))}: {escape(exc.strerror or str(exc))}; give a writable --html FILE",
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_BAD_INPUT
    out.print(
        f"wrote {escape(str(args.html))}: {entries} entries; open it in a browser (filters work offline)",
        highlight=False,
    )
    return EXIT_PASSED


def render(out: Console, b: Board) -> None:
    """One board as a table, a section per (family, device), then what the numbers mean."""
    cols = [
        Col("rank", number=True),
        Col("agent"),
        Col("model", drop=2),
        Col("family", drop=1),
        Col("vendor" if b.by == "vendor" else "device"),
        Col("speedup", number=True),
        Col(f"fast_{b.p:g}", number=True),
        Col("SOL", number=True),
        Col(
            "gap", number=True, drop=5
        ),  # the first to go on a narrow terminal (docs/leaderboard.md)
        Col("correct", number=True),
        Col("results", number=True, drop=3),
        Col("violations", number=True, drop=0 if any(e.violations for e in b.entries) else 5),
        Col("failures", number=True, drop=0 if any(e.unscored for e in b.entries) else 4),
    ]  # all zero: the first to go on a narrow terminal
    rows = []
    for n, (_family, _device, entries) in enumerate(b.groups()):
        rows += [None] if n else []
        for e in entries:
            rows.append(
                [
                    rank_cell(e),
                    escape(e.agent),
                    escape(e.model or "–"),
                    e.family,
                    escape(e.device),
                    *entry_cells(b.timing_kind, e)[:3],
                    gap_cell(b.timing_kind, e),
                    entry_cells(b.timing_kind, e)[3],
                    str(e.results),
                    f"[red]{e.violations}[/]" if e.violations else "0",
                    f"[red]{e.unscored}[/]" if e.unscored else "0",
                ]
            )
    table = fitted(out.width, cols, rows, title=f"[bold]{escape(b.label)}[/]", title_justify="left")
    out.print(table)
    notes = [
        "speedup: geometric mean over results, a failed result counts 1.0 (the baseline stays)"
    ]
    if any(e.unscored for e in b.entries):
        notes.append(
            "failures: failed results, and attempts whose agent produced nothing to score (agent_error, no_submission: never results)"
        )
    if b.ranked and any(e.rank is None for e in b.entries):
        notes.append("rank –: no correct result, never ranked above a correct one")
    starters = [e for e in b.entries if e.starters]
    if starters:
        notes.append(
            "unchanged starter submitted: "
            + ", ".join(f"{e.agent} on {e.family} ({e.starters} of {e.results})" for e in starters)
        )
    if b.ranked:
        notes.append(
            f"fast_{b.p:g}: correct and faster than {b.p:g}× the baseline; an entry with integrity violations ranks below every honest one"
        )
    if b.timing_kind == "cpu":
        notes.append(INTERPRETED_NOTE)
    if b.timing_kind == "external":  # core/tasks/external.py
        notes.append(
            "external tasks: each timed and checked by its own commands and scored by its own rules; never ranked with this arena's protocol"
        )
    if b.infrastructure_errors:
        notes.append(f"{b.infrastructure_errors} infrastructure errors left out")
    out.print("[dim]" + escape("; ".join(notes)) + "[/]", highlight=False)
