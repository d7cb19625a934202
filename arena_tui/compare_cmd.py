"""`arena compare RUN_A RUN_B`: paired per-task differences between two runs (A/B), with a
bootstrap confidence interval on the geometric-mean speedup ratio (core/store/compare.py).
`arena compare A.py B.py --task ID [--device D]`: two candidate files of one task, evaluated with
the same seed and paired per workload (arena_tui/compare_files.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arena_tui.figures import INTERPRETED
from arena_tui.render import ratio
from arena_tui.runs_cmd import _guarded
from arena_tui.tables import Col, fitted
from core.model.result import EXIT_BAD_INPUT, EXIT_PASSED
from core.store.compare import DEFAULT_RESAMPLES, Comparison, Outcome, compare
from core.store.db import Store


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare",
        help="A/B: two runs (paired per task), or two candidate files of one task (--task: paired per workload)",
    )
    p.add_argument(
        "run_a",
        metavar="A",
        help="a run id or a unique prefix of one (the baseline arm); with --task, a candidate file",
    )
    p.add_argument("run_b", metavar="B", help="the run, or the candidate file, compared against A")
    p.add_argument(
        "--task",
        metavar="ID",
        help="compare two candidate files of this task: one batch, the same seed, workloads and baseline",
    )
    p.add_argument(
        "--device",
        help="with --task: default this machine's first GPU, else sim:h200; cpu compares correctness only",
    )
    p.add_argument(
        "--seed", type=int, help="with --task: the secret seed both use (default: a fresh one)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"runs: bootstrap resamples (default {DEFAULT_RESAMPLES})",
    )
    p.set_defaults(func=_dispatch)


def _dispatch(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.task is not None:
        from arena_tui.compare_files import run

        return run(args, out, err)
    files = [x for x in (args.run_a, args.run_b) if x.endswith(".py") and Path(x).is_file()]
    if files:
        err.print(
            f"error: {files[0]} is a candidate file: compare two files of one task with `arena compare A.py B.py --task ID`",
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_BAD_INPUT
    return _compare(args, out, err)


def outcomes(store: Store, run_id: str) -> list[Outcome]:
    jobs = {j.id: j for j in store.jobs(run_id)}
    found = []
    for r in store.results(run_id):
        job = jobs.get(r.job_id)
        if (
            job is None or r.status == "infrastructure_error"
        ):  # not the candidate's outcome: nothing to compare
            continue
        found.append(
            Outcome(
                job.task_id,
                r.device_model or r.device_id,
                r.status == "passed",
                r.speedup,
                r.sol_fraction,
                r.timing_kind,
                _band(r.result),
            )
        )
    return found


def _band(result: dict) -> float | None:
    """A predicted result's band on its speedup: the widest of its workloads' (None if measured)."""
    bands = [
        w["band"]
        for w in result.get("workloads") or []
        if isinstance(w, dict) and isinstance(w.get("band"), (int, float))
    ]
    return max(bands) if bands else None


@_guarded
def _compare(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.resamples < 100:
        err.print(
            "error: --resamples must be at least 100 (fix: drop the option, or pass 1000 or more)"
        )
        return EXIT_BAD_INPUT
    a, b = store.get_run(args.run_a), store.get_run(args.run_b)
    found_a, found_b = outcomes(store, a.id), outcomes(store, b.id)
    result = compare(a.id, found_a, b.id, found_b, resamples=args.resamples)
    if args.json:
        out.print_json(json.dumps(result.to_json()))
        return EXIT_PASSED
    interpreted = bool(found_a + found_b) and all(o.timing_kind == "cpu" for o in found_a + found_b)
    render(out, result, a.name, b.name, interpreted=interpreted)
    if any(o.timing_kind == "external" for o in found_a + found_b):  # core/tasks/external.py
        out.print(
            "[dim]external tasks: timed and scored by each task's own commands and rules, not this arena's protocol[/]"
        )
    return EXIT_PASSED


def render(
    out: Console, c: Comparison, name_a: str, name_b: str, interpreted: bool = False
) -> None:
    """The paired table (the SOL columns where the width allows); a comparison of cpu (interpreted)
    runs shows the correctness shares only, since their speedups are no performance figure."""
    out.print(
        f"[bold]A[/] {c.run_a} {escape(name_a)}   [bold]B[/] {c.run_b} {escape(name_b)}",
        highlight=False,
    )
    if not c.tasks:
        out.print("[yellow]no task was scored on the same device in both runs: nothing to pair[/]")
    else:
        cols = [Col("task", whole=True), Col("device")] + [
            Col(n, number=True) for n in ("correct A", "correct B")
        ]
        if not interpreted:
            cols += [Col(n, number=True) for n in ("speedup A", "speedup B", "B / A")] + [
                Col(n, number=True, drop=1) for n in ("SOL A", "SOL B")
            ]
        rows = []
        for t in c.tasks:
            style = "green" if t.ratio > 1.02 else "red" if t.ratio < 0.98 else ""
            cells = [
                t.task_id,
                escape(t.device),
                _share(t.a.correct, t.a.results),
                _share(t.b.correct, t.b.results),
            ]
            if not interpreted:
                cells += [
                    ratio(t.a.speedup),
                    ratio(t.b.speedup),
                    f"[{style}]{ratio(t.ratio)}[/]" if style else ratio(t.ratio),
                    _sol(t.a.sol_fraction),
                    _sol(t.b.sol_fraction),
                ]
            rows.append(cells)
        table = fitted(out.width, cols, rows)
        out.print(table)
    if (
        c.tasks and interpreted
    ):  # no verdict on interpreted times (core.store.compare says not enough evidence)
        out.print(
            f"speedups of cpu runs: {INTERPRETED} (`--json` keeps them): [bold]{c.verdict}[/]",
            highlight=False,
        )
    elif c.tasks:
        interval = (
            f"{c.confidence:.0%} bootstrap interval {ratio(c.interval[0])} – {ratio(c.interval[1])}, {c.resamples} resamples; "
            if c.interval
            else ""
        )
        out.print(
            f"geometric-mean speedup B / A over {len(c.tasks)} paired tasks: [bold]{ratio(c.geomean_ratio or 0)}[/] "
            f"({interval}{escape(c.why or '')}): [bold]{c.verdict}[/]",
            highlight=False,
        )
        out.print(
            "[dim]effective speedup: the candidate's where it passed, 1.0 (the baseline stays) where it failed[/]"
        )
    for label, keys in (("only in A", c.only_a), ("only in B", c.only_b)):
        if keys:
            out.print(
                f"[dim]{label}: {', '.join(f'{t} on {d}' for t, d in keys)}[/]", highlight=False
            )
    if c.mixed_timing:
        out.print(
            "[yellow]the runs mix timing kinds (measured, predicted, cpu, external): their speedups are not comparable[/]"
        )


def _share(x: float, n: int) -> str:
    return f"{x * 100:.0f}% of {n}"


def _sol(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f}%"
