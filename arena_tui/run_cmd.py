"""`arena run [RUNFILE] [--resume RUN]`: evaluate a run through the scheduler, with progress
bars and a summary table; every result is in the store before it is printed.

A run evaluates candidates and runs agents' attempts (docs/runs.md). Without a run file it runs
the embedded default: the offline `reference` agent submits three bundled tasks' starters on this
machine's first GPU, or on `sim:h200` (predicted H200 times) where there is none. Ctrl-C stops the
run cleanly (agents and everything they started are killed, attempts are recorded cancelled) and
prints the `arena run --resume RUN` command that finishes it.

Before anything is stored, a preflight (core/orchestration/preflight.py) checks every agent's CLI and endpoint
and probes every device; its problems are listed together, one line each, and the run exits 2.
`--skip-preflight` skips it (a device id that does not parse is still refused). Headless, one
line is printed per finished evaluation and attempt, also into a pipe (on stderr with `--json`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from arena_tui import figures, render
from arena_tui.run_tables import attempts_table, candidate_name, run_summary
from arena_tui.runs_cmd import run_json
from arena_tui.signals import Interrupted, cancel_on_signal
from arena_tui.stopping import stopped_run, sweep_leftovers
from arena_tui.wiring import device_prober, executor_factory
from core.model import events
from core.model.keys import parts as key_parts
from core.model.outcome import FAILURES
from core.model.result import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INFRASTRUCTURE, EXIT_PASSED, Result
from core.orchestration import preflight
from core.orchestration.planning import plan, plan_attempts
from core.orchestration.runfile import DEFAULT_RUN, RunFileError, RunSpec, load_run_file
from core.orchestration.runs import AttemptReport, execute
from core.store.db import Store
from core.store.errors import RunOwnedError, StorageFault, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a run file's evaluations and agents (default: the reference agent on three bundled tasks, on this machine's GPU or sim:h200)",
    )
    p.add_argument(
        "runfile",
        nargs="?",
        type=Path,
        help="a run file (docs/runs.md); default: the embedded default run",
    )
    p.add_argument(
        "--resume", metavar="RUN", help="finish an interrupted run (its id or a unique prefix)"
    )
    p.add_argument("--hosts", type=Path, help="the hosts file for <host>/<device> devices")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="the Ray cluster for ray: devices (auto, ray://head:10001, local); without ray: devices, the default run goes there (docs/ray.md)",
    )
    p.add_argument(
        "--headless",
        action="store_true",
        help="progress bars and a summary, no app (always so when stdout is not a terminal)",
    )
    p.add_argument(
        "--skip-preflight",
        action="store_true",
        help="start without checking the agents' CLIs and endpoints and probing the devices",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="headless; progress on stderr, then one JSON object on stdout (what `arena runs show RUN --json` prints)",
    )
    p.set_defaults(func=run)


def resume_command(run_id: str, args: argparse.Namespace) -> str:
    """The exact command that finishes this run: the same store, tasks and hosts."""
    parts = ["arena"]
    for flag, value in (
        ("--db", getattr(args, "db", None)),
        ("--tasks-dir", getattr(args, "tasks_dir", None)),
    ):
        if value is not None:
            parts += [flag, str(value)]
    parts += ["run", "--resume", run_id]
    if getattr(args, "hosts", None) is not None:
        parts += ["--hosts", str(args.hosts)]
    if getattr(args, "ray", None) is not None:
        parts += ["--ray", str(args.ray)]
    if getattr(args, "skip_preflight", False):
        parts.append("--skip-preflight")
    return shlex.join(parts)


def _preflight(spec: RunSpec, args: argparse.Namespace, out: Console, err: Console) -> bool:
    """True when the run may start; else every problem printed, one line each."""
    if getattr(args, "skip_preflight", False):
        problems = preflight.device_problems(spec)
    else:
        agents = sum(a.kind not in preflight.OFFLINE_KINDS for a in spec.agents)
        what = ([f"{agents} agent{'s' * (agents != 1)}"] if agents else []) + [
            f"{len(spec.devices)} device{'s' * (len(spec.devices) != 1)}"
        ]
        progress = (
            err if getattr(args, "json", False) else out
        )  # with --json, stdout is the JSON's alone
        progress.print(f"[dim]preflight: checking {' and '.join(what)}…[/]", highlight=False)
        problems = preflight.check(spec, device_prober(args.hosts, spec.ray))
    if not problems:
        return True
    head = f"the run cannot start: {len(problems)} problem{'s' if len(problems) > 1 else ''} (nothing was stored)"
    if getattr(args, "json", False):  # one JSON error object carrying every problem
        err.print(f"error: {head}: " + "; ".join(escape(str(p)) for p in problems), highlight=False)
        return False
    err.print(f"[red]error:[/] {head}", highlight=False)
    for problem in problems:
        err.print(f"  {escape(str(problem))}", highlight=False, soft_wrap=True)
    if not getattr(args, "skip_preflight", False):
        err.print(
            "[dim]`--skip-preflight` starts it anyway; attempts whose agent cannot work end `agent_error`[/]",
            highlight=False,
        )
    return False


def default_spec(args: argparse.Namespace) -> RunSpec:
    """The embedded default run, on this machine's GPU or sim:h200 (`arena` alone does the same)."""
    from arena_tui.local_devices import default_device

    return RunSpec(
        **{
            **DEFAULT_RUN.__dict__,
            "devices": (default_device(),),
            "tasks_dir": str(args.tasks_dir) if args.tasks_dir else None,
        }
    )


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        store = Store.open(getattr(args, "db", None))
    except StoreError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return EXIT_INFRASTRUCTURE
    sweep_leftovers(Console(stderr=True))
    with store:
        try:
            if args.resume:
                spec = _with_ray(
                    RunSpec.from_json(store.get_run(args.resume).spec), args, default=False
                )
                store.check_lease(args.resume)  # before the preflight's seconds
                if not _preflight(spec, args, out, err):
                    return EXIT_BAD_INPUT
                record = store.resume_run(args.resume)  # takes the lease, or refuses
                run_id = record.id
            else:
                spec = (
                    load_run_file(args.runfile, args.tasks_dir)
                    if args.runfile
                    else default_spec(args)
                )
                spec = _with_ray(spec, args, default=not args.runfile)
                plan(spec)
                plan_attempts(spec)
                if not _preflight(spec, args, out, err):
                    return EXIT_BAD_INPUT
                run_id = store.create_run(spec.name, spec.to_json())
        except (RunFileError, StoreError, LookupError, ValueError) as exc:
            err.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
            return EXIT_BAD_INPUT
        from arena_tui.app.launch import interactive  # textual only when a person watches

        if interactive(getattr(args, "headless", False) or getattr(args, "json", False)):
            from arena_tui.app.launch import run_app

            return run_app(
                store,
                run_id,
                spec,
                executor_factory(args.hosts, spec.ray),
                resume=resume_command(run_id, args),
            )
        return _execute(store, run_id, spec, args, out)


def _with_ray(spec: RunSpec, args: argparse.Namespace, default: bool) -> RunSpec:
    """The run with `--ray` applied, connected to its cluster when it has `ray:` devices: the
    embedded default run (`default`) moves onto the cluster's GPUs, else its CPUs. Without the
    `ray` package, or with an unreachable cluster, a DeviceError (exit 2) says what to do."""
    if getattr(args, "ray", None):
        spec = dataclasses.replace(spec, ray=args.ray)
    if not spec.ray and not any(d.startswith("ray:") for d in spec.devices):
        return spec
    from core.orchestration import ray_executor

    ray_executor.connect(spec.ray)  # here, on the main thread: the preflight probes from threads
    if not any(d.startswith("ray:") for d in spec.devices):
        if not default:
            raise ValueError(
                f"--ray {spec.ray}: the run names no ray: device ({', '.join(spec.devices)}): list e.g. `devices: [ray:cuda]` in the run file (docs/ray.md)"
            )
        spec = dataclasses.replace(spec, devices=(ray_executor.default_device(spec.ray),))
    return spec


def _execute(
    store: Store, run_id: str, spec: RunSpec, args: argparse.Namespace, out: Console
) -> int:
    if getattr(args, "json", False):
        code = _execute_headless(
            store, run_id, spec, args, Console(stderr=True)
        )  # stdout is the JSON's alone
        sys.stdout.write(json.dumps(run_json(store, run_id)) + "\n")
        return code
    return _execute_headless(store, run_id, spec, args, out)


def _execute_headless(
    store: Store, run_id: str, spec: RunSpec, args: argparse.Namespace, out: Console
) -> int:
    candidate_keys = {p.key for p in plan(spec)}
    attempts = plan_attempts(spec)
    total = len(candidate_keys) + len(attempts)
    attempt_rows = store.attempts(run_id)
    done_before = sum(
        1 for r in store.results(run_id) if store.get_job(r.job_id).key in candidate_keys
    )
    done_before += sum(1 for a in attempt_rows if a.state == "done")
    verb = "resuming" if args.resume else "starting"
    what = f"{len(candidate_keys)} evaluations" + (
        f", {len(attempts)} agent attempts" if attempts else ""
    )
    out.print(
        f"[bold]{verb} run {run_id}[/] ({escape(spec.name)}): {what}, {done_before} already done; devices {', '.join(spec.devices)}"
    )
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=False,
    )
    bar = progress.add_task(f"run {run_id}", total=total, completed=done_before)

    finished = [done_before]

    def line(mark: str, text: str) -> None:
        """One line per finished job or attempt: printed at once, also into a pipe."""
        finished[0] += 1
        progress.console.print(
            f"  {mark} [{finished[0]}/{total}] {text}", highlight=False, soft_wrap=True
        )

    labels: dict[int, str] = {}

    def on_event(job_id: int | None, event: events.Event) -> None:
        if isinstance(event, events.Heartbeat) and job_id is not None:
            # A stage that runs long says where it stands, at least every 10 s (the engine's beat).
            if job_id not in labels:
                job = store.get_job(job_id)
                labels[job_id] = (
                    f"{job.task_id} {escape(candidate_name(job))} ({escape(job.device_id)})"
                )
            progress.console.print(
                f"  [dim]… {labels[job_id]}: {escape(event.text())}[/]", highlight=False
            )
            return
        if (
            isinstance(event, events.JobStateChanged)
            and event.state in ("done", "failed")
            and event.job_id in candidate_keys
        ):
            progress.advance(bar)
            task, candidate, device = key_parts(event.job_id)[:3]
            label = f"{task} {escape(candidate)} ({escape(device)})"
            if event.state == "failed":
                line("[yellow]![/]", f"{label}: {escape(event.reason or 'failed')}")
                return
            row = next((r for r in store.results(run_id) if r.job_id == job_id), None)
            if row is not None:
                r = row.to_result()
                seconds = f", {r.seconds:.0f} s" if r.seconds is not None else ""
                line("[green]✓[/]" if r.passed else "[red]✗[/]", f"{label}: {_verdict(r)}{seconds}")

    def on_attempt(report: AttemptReport) -> None:
        label = f"{escape(report.agent)} on {report.task_id} ({escape(report.device)}, {escape(report.variant)})"
        if report.state == "running":
            progress.console.print(
                f"  [cyan]>[/] {report.attempt_id} {label}: agent running", highlight=False
            )
            return
        if report.state in ("done", "failed"):
            progress.advance(bar)
        if report.result is not None:
            starter = " [yellow](the unchanged starter)[/]" if report.outcome == "starter" else ""
            line(
                "[green]✓[/]" if report.result.passed else "[red]✗[/]",
                f"{report.attempt_id} {label}: stopped ({report.stop_reason}), {_verdict(report.result)}{starter}",
            )
        elif (
            report.state == "done" and report.outcome
        ):  # agent_error | no_submission: nothing of the agent's to score
            line(
                "[red]✗[/]",
                f"{report.attempt_id} {label}: [red]{report.outcome}[/] ({escape(report.outcome_reason or '')}); not scored",
            )
        elif report.state != "cancelled":
            line(
                "[yellow]![/]",
                f"{report.attempt_id} {label}: {escape(report.error or report.state)}",
            )

    stopped: BaseException | None = None
    with progress:
        try:
            outcome = asyncio.run(
                cancel_on_signal(
                    lambda: execute(
                        store,
                        run_id,
                        spec,
                        executor_factory(args.hosts, spec.ray),
                        on_event,
                        on_attempt,
                    )
                )
            )
        except (Interrupted, KeyboardInterrupt, StorageFault, RunOwnedError) as exc:
            stopped = exc
    if stopped is not None:
        return stopped_run(store, run_id, total, stopped, resume_command(run_id, args), out)
    run_summary(store, run_id, out, candidate_keys)
    if attempts:
        results = {r.job_id: r for r in store.results(run_id)}
        attempts_table(store, run_id, results, out, title=f"agent attempts of run {run_id}")
        render.timing_notes(out, {r.timing_kind for r in results.values()})
    if outcome.failed_jobs:
        return EXIT_INFRASTRUCTURE
    statuses = [row.status for row in store.results(run_id)]
    unscored = any(a.outcome in FAILURES for a in store.attempts(run_id))
    return EXIT_PASSED if all(s == "passed" for s in statuses) and not unscored else EXIT_FAILED


def _verdict(r: Result) -> str:
    """passed with its speedup; a failure with its stage and no speedup (the failure rule: docs/leaderboard.md)."""
    return (
        f"[green]passed[/] {figures.result_speedup(r)}"
        if r.passed
        else f"[red]{r.status}[/] at {r.failed_stage}"
    )
