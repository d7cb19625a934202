"""`arena tasks list|show|validate|new|add-model`: browse, check, create and extend tasks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arena_tui import add_model_cmd, render
from arena_tui.tables import plain_table
from core.model.result import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_PASSED
from core.tasks.discovery import discover, find_task, tasks_root


def tasks_dir_option(p: argparse.ArgumentParser, help: str) -> None:
    """`--tasks-dir` after a subcommand too; suppressed when absent, so that it never overwrites
    the one given before the subcommand (`arena --tasks-dir X tasks new ...`)."""
    p.add_argument("--tasks-dir", type=Path, default=argparse.SUPPRESS, help=help)


def register(sub: argparse._SubParsersAction) -> None:
    tasks = sub.add_parser("tasks", help="list, show, validate, create and extend tasks")
    tsub = tasks.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND", required=True)
    p = tsub.add_parser(
        "list", help="every task, one line each: its id (family/name), baseline kind and models"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON list (every field of `tasks show --json` per task)",
    )
    p.set_defaults(func=_list)
    p = tsub.add_parser(
        "show", help="one task's spec and visible workloads (never the hidden ones)"
    )
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_show)

    p = tsub.add_parser(
        "validate",
        help="check that tasks are sound: schema, reference, baseline and starter pass, the rule has teeth",
    )
    p.add_argument("ids", nargs="*", metavar="ID", help="task ids or folders (default: every task)")
    p.add_argument(
        "--no-eval",
        action="store_true",
        help="skip the harness evaluations of the baseline and the starter (seconds instead of minutes)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="run the performance stage too, so the CPU budget is measured rather than estimated",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=60.0,
        metavar="S",
        help="CPU seconds the starter's CPU evaluation may take (default 60; the harness's processes' CPU time, which load does not stretch)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of every draw (inputs, hidden workloads); default 0",
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON list of reports and nothing else"
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show every check, not only failures and warnings",
    )
    p.set_defaults(func=_validate)

    p = tsub.add_parser("new", help="scaffold tasks/FAMILY/NAME from a commented, working template")
    p.add_argument("id", metavar="FAMILY/NAME")
    tasks_dir_option(p, "create it under this folder instead of the tasks folder")
    p.set_defaults(func=_new)

    add_model_cmd.register(tsub, tasks_dir_option)


def _error(err: Console, message: str) -> int:
    err.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return EXIT_BAD_INPUT


def _list(args: argparse.Namespace, out: Console, err: Console) -> int:
    tasks = discover(args.tasks_dir)
    if args.json:
        print(json.dumps([render.task_json(t) for t in tasks]))
    else:
        render.tasks_table(out, tasks)
    return EXIT_PASSED


def _show(args: argparse.Namespace, out: Console, err: Console) -> int:
    task = find_task(args.id, args.tasks_dir)
    if args.json:
        print(json.dumps(render.task_json(task)))
    else:
        render.task_detail(out, task)
    return EXIT_PASSED


# --- validate --------------------------------------------------------------------------------

MARK = {True: "[green]✓[/]", False: "[red]✗[/]", "warning": "[yellow]![/]"}


def _validate(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.evaluation.validate import resolve_targets, validate_tasks
    from core.evaluation.validate_report import ValidateOptions

    folders = resolve_targets(args.ids, args.tasks_dir)  # an unknown id: UnknownTaskError, exit 2
    if not folders:
        return _error(
            err, f"no tasks under {tasks_root(args.tasks_dir)}: pass task ids or --tasks-dir DIR"
        )
    options = ValidateOptions(
        seed=args.seed, evaluate=not args.no_eval, performance=args.full, cpu_budget_s=args.budget
    )
    if args.json:
        reports = validate_tasks(folders, options)
        print(json.dumps([r.to_json() for r in reports]))
        return EXIT_PASSED if all(r.passed for r in reports) else EXIT_FAILED
    out.print(
        f"validating {len(folders)} task(s){'' if options.evaluate else ' (no harness evaluations)'}"
    )
    with out.status("starting") as status:

        def on_check(task_id: str, check: str) -> None:
            status.update(f"{escape(task_id)}: {check}")

        def on_report(report) -> None:  # type: ignore[no-untyped-def]
            _report(out, report, args.verbose)

        reports = validate_tasks(folders, options, on_check=on_check, on_report=on_report)
    failed = [r for r in reports if not r.passed]
    if len(reports) > 1:
        table = plain_table()
        for col in ("task", "result", "failed checks", "seconds"):
            table.add_column(
                col, justify="right" if col == "seconds" else "left", no_wrap=col != "failed checks"
            )
        for r in reports:
            table.add_row(
                r.task_id,
                "[green]valid[/]" if r.passed else "[red]invalid[/]",
                ", ".join(c.name for c in r.failed),
                f"{r.seconds:.1f}",
            )
        out.print(table)
    out.print(f"{len(reports) - len(failed)} of {len(reports)} task(s) valid")
    return EXIT_FAILED if failed else EXIT_PASSED


def _report(out: Console, report, verbose: bool) -> None:  # type: ignore[no-untyped-def]
    n = len(report.checks)
    head = f"{len(report.failed)} of {n} checks failed" if report.failed else f"{n} checks passed"
    out.print(
        f"{MARK[report.passed]} [bold]{escape(report.task_id)}[/] {head} ({report.seconds:.1f} s)",
        highlight=False,
    )
    for c in report.checks:
        if verbose or not c.passed or c.warning:
            mark = MARK["warning"] if c.passed and c.warning else MARK[c.passed]
            out.print(
                f"    {mark} {c.name:<16} {escape(c.message)}", highlight=False, soft_wrap=True
            )


# --- new -------------------------------------------------------------------------------------


def _new(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.tasks.scaffold import ScaffoldError, scaffold

    root = getattr(args, "tasks_dir", None) or tasks_root(None)
    try:
        made = scaffold(args.id, Path(root))
    except ScaffoldError as exc:
        return _error(err, str(exc))
    out.print(f"created {escape(str(made.path))}: {', '.join(made.files)}")
    out.print(
        f"it is a working example (y = x · scale): edit each file (the comments in task.yaml say how), then run "
        f"`arena{' --tasks-dir ' + str(root) if getattr(args, 'tasks_dir', None) else ''} tasks validate {made.task_id}`",
        highlight=False,
    )
    return EXIT_PASSED
