"""The tables of a run that both `arena run` (as it ends) and `arena runs show` print: its candidate
jobs' results and its agent attempts, with the cells they share (a candidate's name, a job's
state, a result's status)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arena_tui import figures, render
from arena_tui.tables import Col, fitted
from core.model.keys import parts as key_parts
from core.model.outcome import FAILURES
from core.store.db import Store

STATUS_STYLE = {"passed": "green", "failed": "red", "infrastructure_error": "yellow"}


def status_cell(status: str) -> str:
    """A result's status, coloured (`infrastructure_error` shortened to `infra error`)."""
    return f"[{STATUS_STYLE.get(status, 'white')}]{status.replace('infrastructure_error', 'infra error')}[/]"


def job_state(state: str) -> str:
    return {
        "running": "[cyan]running[/]",
        "failed": "[yellow]failed[/]",
        "cancelled": "[dim]cancelled[/]",
    }.get(state, state)


def candidate_name(job) -> str:  # type: ignore[no-untyped-def]
    """What was evaluated: the agent of an attempt, else the candidate's label in a run's job key
    (`task|label|device|n`: `starter`, `baseline`, a file's stem), else the file's name."""
    if job.agent:
        return job.agent
    parts = key_parts(job.key)
    if len(parts) >= 4 and parts[0] == job.task_id:
        return parts[1]
    return Path(job.candidate).name if job.candidate else "–"


def run_summary(store: Store, run_id: str, out: Console, candidate_keys: set[str]) -> None:
    """The results of a run's candidate jobs (`candidate_keys`) as `arena run` ends."""
    jobs = {job.id: job for job in store.jobs(run_id) if job.key in candidate_keys}
    if not jobs:
        return
    cols = [
        Col("task", whole=True),
        Col("candidate"),
        Col("device"),
        Col("status"),
        Col("stages", whole=True, drop=1),
        Col("speedup", number=True),
        Col("SOL", number=True),
        Col("points", number=True),
    ]
    kinds, rows = set(), []
    for row in store.results(run_id):
        job = jobs.get(row.job_id)
        if job is None:
            continue  # an agent attempt's final evaluation: in the attempts table
        result = row.to_result()
        kinds.add(result.timing_kind)
        rows.append(
            [
                job.task_id,
                escape(candidate_name(job)),
                job.device_id,
                result.status,
                render.stage_marks(result),
                figures.result_speedup(result),  # with its band; failed: –
                figures.sol_cell(result.timing_kind, result.sol_fraction) if result.passed else "–",
                f"{result.points:.0f}",
            ]
        )
    table = fitted(out.width, cols, rows, title=f"run {run_id}")
    out.print(table)
    out.print(f"[dim]{figures.STAGE_LEGEND}. `arena runs show {run_id}` for details.[/]")
    render.timing_notes(out, kinds)


def attempts_table(
    store: Store, run_id: str, results: dict, out: Console, title: str = "agent attempts"
) -> None:
    """A run's agent attempts, one row each (`results`: its result rows by job id), each
    attempt that produced nothing to score named below, and how to read a transcript."""
    attempts = store.attempts(run_id)
    if not attempts:
        return
    variants = len({a.variant for a in attempts}) > 1  # columns that say something only sometimes
    costs = any(a.cost_usd is not None for a in attempts)
    cols = (
        [Col("#", number=True), Col("agent")]
        + ([Col("variant", drop=1)] if variants else [])
        + [
            Col("task", whole=True),
            Col("device"),
            Col("stopped", drop=2),
            Col("status"),
            Col("speedup", number=True),
            Col("points", number=True),
            Col("checks", number=True),
        ]
        + ([Col("cost", number=True)] if costs else [])
    )
    rows = []
    for a in attempts:
        r = results.get(a.job_id) if a.job_id is not None else None
        stopped = a.stop_reason or job_state(a.state)
        if a.exit_status not in (None, 0):
            stopped += f" ({a.exit_status})"
        status = status_cell(r.status) if r else job_state(a.state)
        if a.outcome in FAILURES:
            status = f"[red]{a.outcome}[/]"
        elif a.outcome == "starter" and r is not None:
            status += " [yellow](starter)[/]"
        cells = (
            [a.id.rsplit("/", 1)[-1], escape(a.agent)]
            + ([escape(a.variant)] if variants else [])
            + [
                a.task_id,
                escape(a.device_id),
                stopped,
                status,
                figures.result_speedup(r.to_result()) if r else "–",
                f"{r.points:.0f}" if r else "–",
                str(a.checks),
            ]
        )
        if costs:
            cells.append(f"${a.cost_usd:.2f}" if a.cost_usd is not None else "–")
        rows.append(cells)
    table = fitted(out.width, cols, rows, title=title)
    out.print(table)
    for a in attempts:
        if a.outcome in FAILURES:
            out.print(
                f"[red]{a.outcome}[/] #{a.id.rsplit('/', 1)[-1]}: {escape(a.outcome_reason or '')} (not scored)",
                highlight=False,
                soft_wrap=True,
            )
    if any(a.outcome == "starter" for a in attempts):
        out.print("[dim](starter): the agent submitted the unchanged starter[/]", highlight=False)
    out.print(
        f"[dim]`arena runs transcript {escape(run_id)}/#` prints an attempt's transcript.[/]",
        highlight=False,
    )
