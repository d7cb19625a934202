"""`arena compare A.py B.py --task ID [--device D]`: two candidate files of one task, evaluated
as one batch (the same seed, hence the same workloads and inputs, the same baseline), paired
workload by workload with an interval on each ratio, and a verdict (core/evaluation/paired.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arena_tui import figures, local_devices, render
from arena_tui.tables import Col, fitted
from core.evaluation.paired import FASTER_A, FASTER_B, FileComparison, compare_results
from core.model import events
from core.model.result import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_PASSED
from core.tasks.discovery import find_task

VERDICT_STYLE = {FASTER_B: "green", FASTER_A: "red"}


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Evaluate A and B, print the paired table (or one JSON object), exit 0 when both passed."""
    from core.evaluation.evaluator import BadCandidate, Evaluator, check_candidate

    task = find_task(args.task, args.tasks_dir)  # unknown: UnknownTaskError, exit 2
    paths = [Path(args.run_a), Path(args.run_b)]
    try:
        for path in paths:
            check_candidate(path, task)
    except BadCandidate as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    if paths[0].resolve() == paths[1].resolve():
        err.print("[red]error:[/] A and B are the same file: give two candidates", highlight=False)
        return EXIT_BAD_INPUT
    device = args.device or local_devices.default_device()
    local_devices.require_here(device)
    seed = args.seed if args.seed is not None else secrets.randbits(63)
    shown = Console(stderr=True) if args.json else out  # with --json, stdout is the JSON's alone
    with Evaluator(device) as evaluator:
        shown.print(
            f"[bold]{task.id}[/]: A {escape(str(paths[0]))} against B {escape(str(paths[1]))}, "
            f"one batch (seed {seed}: the same workloads and inputs for both)",
            highlight=False,
        )
        shown.print(f"device: {render.device_line(evaluator.info)}", highlight=False)
        a, b = asyncio.run(
            evaluator.aevaluate_batch(task, paths, seed=seed, on_event=_progress(shown))
        )
    comparison = compare_results(a, b, seed)
    if args.json:
        sys.stdout.write(json.dumps(comparison.to_json()) + "\n")
    else:
        show(out, comparison)
    return EXIT_PASSED if a.passed and b.passed else EXIT_FAILED


def _progress(out: Console):  # type: ignore[no-untyped-def]
    """Each stage of A, then of B, as it ends; the engine's heartbeat while one runs."""
    member = [0]

    def on_event(event: events.Event) -> None:
        who = "AB"[min(member[0], 1)]
        if isinstance(event, events.StageFinished):
            mark = render.MARK.get(event.status, "?")
            message = f" — {escape(event.message.splitlines()[0])}" if event.message else ""
            out.print(
                f"  {who} {mark} {event.stage:<15} {event.status:<8} {event.seconds:6.2f} s{message}",
                highlight=False,
            )
        elif isinstance(event, events.Heartbeat):
            out.print(f"  {who} [dim]… {escape(event.text())}[/]", highlight=False)
        elif isinstance(event, events.EvaluationFinished):
            member[0] += 1

    return on_event


def show(out: Console, c: FileComparison) -> None:
    """Per workload: A's and B's times with their bands, B's speedup over A with its interval;
    then the geometric mean, its interval and the verdict."""
    kind = c.timing_kind
    for name, r in (("A", c.a), ("B", c.b)):
        verdict = f"[green]{r.status}[/]" if r.passed else f"[red]{r.status}[/] at {r.failed_stage}"
        out.print(
            f"{name}: {verdict}, speedup over the baseline {figures.result_speedup(r)}",
            highlight=False,
        )
    if c.workloads:
        times = {(w.label, w.hidden): w for w in c.a.workloads}
        theirs = {(w.label, w.hidden): w for w in c.b.workloads}
        rows: list[list[str] | None] = []
        for p in c.workloads:
            low_high = p.interval
            rows.append(
                [
                    escape(p.label + (" (hidden)" if p.hidden else "")),
                    figures.time_cell(times[(p.label, p.hidden)].candidate, kind),
                    figures.time_cell(theirs[(p.label, p.hidden)].candidate, kind),
                    figures.ratio(p.ratio),
                    f"{figures.ratio(low_high[0])}–{figures.ratio(low_high[1])}"
                    if low_high
                    else "–",
                ]
            )
        cols = [
            Col("workload"),
            Col("A", number=True),
            Col("B", number=True),
            Col("B / A", number=True),
            Col("interval", number=True),
        ]
        out.print(fitted(out.width, cols, rows, title=f"{kind} times; B / A: B's speedup over A"))
    style = VERDICT_STYLE.get(c.verdict, "bold")
    if c.ratio is not None:
        interval = (
            f", interval {figures.ratio(c.interval[0])}–{figures.ratio(c.interval[1])}"
            if c.interval
            else ""
        )
        out.print(
            f"B / A over {len(c.workloads)} workloads: [bold]{figures.ratio(c.ratio)}[/] "
            f"(geometric mean{interval}): [{style}]{c.verdict}[/] ({escape(c.why)})",
            highlight=False,
        )
    else:
        out.print(
            f"[{style}]{c.verdict}[/]" + (f" ({escape(c.why)})" if c.why else ""), highlight=False
        )
    out.print(
        f"[dim]same seed {c.seed} for both: `--seed {c.seed}` repeats this comparison[/]",
        highlight=False,
    )
