"""`arena runs list|show|export|transcript`: the runs kept in the results store (see docs/store.md),
their agent attempts and the attempts' transcripts."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arena_tui.figures import sol_cell, speedup_cell
from arena_tui.render import timing_notes
from arena_tui.run_tables import attempts_table, candidate_name, job_state, status_cell
from arena_tui.tables import Col, fitted
from core.model.result import EXIT_BAD_INPUT, EXIT_PASSED
from core.store.db import Store
from core.store.errors import StoreError, UnknownRunError
from core.store.rows import JOB_STATES, STALE, Run

RUN_STYLE = {
    "running": "cyan",
    "finished": "green",
    "interrupted": "yellow",
    "stale": "yellow",  # left running by a process that is gone: resume it
    "cancelled": "dim",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    runs = subparsers.add_parser(
        "runs", help="list, show or export the runs kept in the results store"
    )
    rsub = runs.add_subparsers(dest="runs_command", metavar="SUBCOMMAND", required=True)
    lister = rsub.add_parser(
        "list", help="every run, newest first, with its jobs and results counted"
    )
    lister.add_argument("--json", action="store_true", help="print one JSON list of runs")
    lister.set_defaults(func=_list)
    show = rsub.add_parser("show", help="one run: its header, then a row per job with its result")
    show.add_argument("run", metavar="RUN", help="a run id, or a unique prefix of one")
    show.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: the run, its jobs with their results, its attempts",
    )
    show.set_defaults(func=_show)
    export = rsub.add_parser(
        "export", help="one run as JSON lines: the run header, then each job with its result"
    )
    export.add_argument("run", metavar="RUN", help="a run id, or a unique prefix of one")
    export.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of standard output"
    )
    export.set_defaults(func=_export)
    transcript = rsub.add_parser("transcript", help="one agent attempt's transcript, step by step")
    transcript.add_argument(
        "attempt",
        metavar="ATTEMPT",
        help="RUN/N, as `arena runs show RUN` lists them (the run part may be a prefix)",
    )
    transcript.add_argument(
        "--jsonl",
        action="store_true",
        help="print the TranscriptEvents as JSON lines (what the replay agent reads)",
    )
    transcript.add_argument("--full", action="store_true", help="do not shorten long tool results")
    transcript.set_defaults(func=_transcript)


def _guarded(command):  # type: ignore[no-untyped-def]
    """Open the store for `command` and turn its errors into one line and exit code 2. These
    commands only read: a store that cannot be written (a read-only file system) is read
    through SQLite's read-only mode."""

    def run(args: argparse.Namespace, out: Console, err: Console) -> int:
        try:
            with Store.open(getattr(args, "db", None), mode="auto") as store:
                return command(store, args, out, err)
        except UnknownRunError as exc:
            # `--json`: an `error:` line, which the CLI turns into the JSON error object
            err.print(
                ("error: " if getattr(args, "json", False) else "") + escape(str(exc)),
                highlight=False,
                soft_wrap=True,
            )
        except (StoreError, OSError) as exc:
            err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT

    return run


@_guarded
def _list(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    runs = store.list_runs()
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in runs]))
        return EXIT_PASSED
    if not runs:
        out.print(f"no runs yet in {escape(str(store.path))}", highlight=False)
        return EXIT_PASSED
    cols = [
        Col("run", whole=True),
        Col("name"),
        Col("created (UTC)", whole=True, drop=2),
        Col("status"),
        Col("jobs", drop=1),
        Col("results"),
    ]
    rows = [
        [
            run.id,
            escape(run.name),
            _when(run.created_at),
            _run_status(run),
            _job_counts(run),
            _result_counts(run),
        ]
        for run in runs
    ]
    table = fitted(out.width, cols, rows)
    out.print(table)
    shown = escape(str(store.path)) + (" (read-only)" if store.read_only else "")
    out.print(f"[dim]{len(runs)} runs in {shown}[/]", highlight=False)
    return EXIT_PASSED


@_guarded
def _show(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    run = store.get_run(args.run)
    if args.json:
        print(json.dumps(run_json(store, run.id)))
        return EXIT_PASSED
    ended = f", ended {_when(run.finished_at)}" if run.finished_at else ""
    out.print(f"[bold]{run.id}[/] {escape(run.name)} — {_run_status(run)}", highlight=False)
    if run.lease is not None and run.status in ("running", STALE):
        owner = escape(run.lease.describe())
        out.print(
            f"  executed by {owner}"
            if run.status == "running"
            else f"  left running by {owner}, which is gone: `arena run --resume {run.id}` finishes it",
            highlight=False,
        )
    out.print(f"created {_when(run.created_at)} UTC{ended}", highlight=False)
    out.print(f"jobs: {_job_counts(run)}; results: {_result_counts(run)}", highlight=False)
    if run.spec:
        out.print(f"[dim]spec: {escape(json.dumps(run.spec))}[/]", highlight=False, soft_wrap=True)
    jobs = store.jobs(run.id)
    if not jobs:
        attempts_table(
            store, run.id, {}, out
        )  # attempts that produced nothing to score have no job
        return EXIT_PASSED
    results = {r.job_id: r for r in store.results(run.id)}
    kinds = sorted({r.timing_kind for r in results.values()})
    mixed = len(kinds) > 1
    cols = [
        Col("task", whole=True),
        Col("candidate"),
        Col("device"),
        Col("state", drop=1),
        Col("status"),
        Col("speedup", number=True),
        Col("SOL", number=True),
        Col("points", number=True),
    ] + ([Col("timing")] if mixed else [])
    rows = []
    for job in jobs:
        r = results.get(job.id)
        cells = [
            job.task_id,
            escape(candidate_name(job)),
            escape(job.device_id),
            job_state(job.state),
        ]
        if r is None:
            cells += ["–", "", "", ""] + ([""] if mixed else [])
        else:
            status = status_cell(r.status)
            status += f" ({r.failed_stage})" if r.failed_stage else ""
            cells += [
                status
                + (" [red]![/]" if r.integrity_flags else "")
                + (" [magenta]infra?[/]" if r.infrastructure_marks else ""),
                speedup_cell(
                    r.timing_kind, r.speedup if r.status == "passed" else None
                ),  # failed: – (docs/leaderboard.md)
                sol_cell(r.timing_kind, r.sol_fraction) if r.status == "passed" else "–",
                f"{r.points:.0f}",
            ] + ([r.timing_kind] if mixed else [])
        rows.append(cells)
    table = fitted(out.width, cols, rows)
    out.print(table)
    for job in jobs:
        r = results.get(job.id)
        for flag in r.integrity_flags if r else ():
            out.print(
                f"[red]integrity:[/] {job.task_id} on {escape(job.device_id)}: {escape(flag)}",
                highlight=False,
            )
        for note in r.review_notes if r else ():
            out.print(
                f"[yellow]review:[/] {job.task_id} on {escape(job.device_id)}: {escape(note)}",
                highlight=False,
            )
        for note in r.infrastructure_marks if r else ():
            out.print(
                f"[magenta]marked infrastructure fault:[/] {job.task_id} on {escape(job.device_id)}: {escape(note)}"
                " (left out of the leaderboard)",
                highlight=False,
            )
    attempts_table(store, run.id, results, out)
    if len(kinds) == 1:
        out.print(f"[dim]timing kind: {kinds[0]}[/]")
    timing_notes(out, set(kinds))
    return EXIT_PASSED


def run_json(store: Store, run_id: str) -> dict:
    """`arena runs show RUN --json` (and `arena run --json`): the export's records as one object."""
    records = list(store.export_run(run_id))
    return {
        "run": records[0],
        "jobs": [r for r in records if r["type"] == "job"],
        "attempts": [r for r in records if r["type"] == "attempt"],
    }


@_guarded
def _transcript(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.model.events import to_json

    attempt = store.get_attempt(args.attempt)
    steps = store.transcript(attempt.id)
    if args.jsonl:
        for event in steps:
            sys.stdout.write(json.dumps(to_json(event)) + "\n")
        sys.stdout.flush()
        return EXIT_PASSED
    out.print(
        f"[bold]{attempt.id}[/] {escape(attempt.agent)} ({attempt.agent_kind}{', ' + escape(attempt.model) if attempt.model else ''}) "
        f"on {attempt.task_id}, {escape(attempt.device_id)}, variant {escape(attempt.variant)} — {attempt.state}"
        + (f", stopped: {attempt.stop_reason}" if attempt.stop_reason else "")
        + (f", {attempt.outcome}" if attempt.outcome and attempt.outcome != "scored" else ""),
        highlight=False,
    )
    if not steps:
        out.print("no transcript steps recorded", highlight=False)
    limit = None if args.full else 1200
    for e in steps:
        style = {
            "error": "red",
            "thinking": "dim",
            "tool_call": "cyan",
            "tool_result": "green",
            "usage": "dim",
            "final": "bold",
        }.get(e.kind, "")
        if e.kind == "tool_call":
            body = f"{e.tool or '?'} {json.dumps(e.arguments or {})}"
        elif e.kind == "usage":
            body = ", ".join(
                f"{k} {v}"
                for k, v in (("in", e.input_tokens), ("out", e.output_tokens), ("$", e.cost_usd))
                if v is not None
            )
            body += " (cumulative)" if e.cumulative else ""
        else:
            body = e.text or ""
        if limit is not None and len(body) > limit:
            body = body[:limit] + f" … [{len(body) - limit} more characters: --full]"
        tag = f"[{style}]{e.kind}[/]" if style else e.kind
        out.print(
            f"{e.seq:>4} {tag}{' [red](error)[/]' if e.is_error and e.kind != 'error' else ''}: {escape(body)}",
            highlight=False,
            soft_wrap=True,
        )
    return EXIT_PASSED


@_guarded
def _export(store: Store, args: argparse.Namespace, out: Console, err: Console) -> int:
    run = store.get_run(args.run)  # an unknown run fails here, before any file is made
    lines = (json.dumps(record) + "\n" for record in store.export_run(run.id))
    if args.output is None:
        try:
            for line in lines:
                sys.stdout.write(line)
            sys.stdout.flush()
        except BrokenPipeError:  # `arena runs export RUN | head`: the reader has had enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PASSED
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", encoding="utf-8") as f:
        count = sum(1 for line in lines if f.write(line))
    err.print(
        f"wrote {count} lines (the run and {count - 1} jobs) to {escape(str(args.output))}",
        highlight=False,
    )
    return EXIT_PASSED


def _when(stamp: str | None) -> str:
    return (stamp or "")[:16].replace("T", " ")


def _run_status(run: Run) -> str:
    return f"[{RUN_STYLE.get(run.status, 'white')}]{run.status}[/]"


def _job_counts(run: Run) -> str:
    if not run.job_states:
        return "none"
    return ", ".join(f"{run.job_states[s]} {s}" for s in JOB_STATES if run.job_states.get(s))


def _result_counts(run: Run) -> str:
    names = {"passed": "passed", "failed": "failed", "infrastructure_error": "infra error"}
    return (
        ", ".join(
            f"{run.result_statuses[s]} {name}"
            for s, name in names.items()
            if run.result_statuses.get(s)
        )
        or "none"
    )
