"""`arena tasks add-model`: a model's rows in every task it uses, from its config.json, a folder of
configs, or the model zoo (`--zoo`: tasks/models.yaml, which also rewrites docs/tasks.md's
coverage table). core/tasks/model_rows.py does the work; this prints it (`--json`: one object)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from arena_tui.tables import plain_table
from core.model.result import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_PASSED
from core.tasks.discovery import discover


def register(tsub: argparse._SubParsersAction, tasks_dir_option: Callable[..., None]) -> None:
    p = tsub.add_parser(
        "add-model",
        help="add a model's rows (from its config.json, a folder of them, or the model zoo) to every task that runs its operations",
    )
    p.add_argument(
        "configs",
        type=Path,
        nargs="*",
        metavar="CONFIG",
        help="Hugging Face config.json files, or folders of them (*.json, */config.json)",
    )
    p.add_argument(
        "--zoo",
        type=Path,
        nargs="?",
        const=True,
        default=None,
        metavar="FILE",
        help="the model zoo (default tasks/models.yaml): regenerate every zoo model's rows and docs/tasks.md's coverage table",
    )
    p.add_argument(
        "--name",
        help="the model's name in task.yaml (one config; default: the repo id of a Hugging Face cache path, else _name_or_path, else the folder of a config.json)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be added; write nothing")
    p.add_argument(
        "--visible",
        action="store_true",
        help="add the rows to the visible workloads (timed by every evaluation) instead of workloads.models",
    )
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="with --dry-run: skip the small runs of each task's reference and baseline (seconds instead of minutes)",
    )
    p.add_argument(
        "--docs",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --zoo: the page whose coverage table to rewrite (default docs/tasks.md of this checkout, for the bundled zoo only)",
    )
    p.add_argument(
        "--task",
        action="append",
        default=None,
        metavar="ID",
        help="only this task (repeat for more); the coverage table still counts every task",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object and nothing else")
    tasks_dir_option(p, "the folder of task folders to edit")
    p.set_defaults(func=_add_model)


def _error(err: Console, message: str) -> int:
    err.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return EXIT_BAD_INPUT


def _add_model(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.tasks.model_config import ModelConfigError
    from core.tasks.model_zoo import configs_in, read_zoo

    if args.no_probe and not args.dry_run:
        return _error(
            err,
            "--no-probe: only with --dry-run (a row is written only after its small run passes)",
        )
    if bool(args.zoo) == bool(args.configs):
        return _error(err, "pass config files or folders, or --zoo (not both)")
    try:
        if args.zoo:
            zoo = read_zoo(None if args.zoo is True else args.zoo)
            configs, serving = zoo.models, zoo.serving
        else:
            configs, serving = configs_in(args.configs, args.name), None
    except ModelConfigError as exc:
        return _error(err, str(exc))
    root = getattr(args, "tasks_dir", None)
    tasks = discover(root)
    if args.task:
        unknown = sorted(set(args.task) - {t.id for t in tasks})
        if unknown:
            return _error(
                err, f"--task {unknown[0]}: unknown task: run `arena tasks list` to see the ids"
            )
    report: dict[str, Any] = {
        "models": [],
        "dry_run": args.dry_run,
        "into": "visible" if args.visible else "models",
    }
    probers: dict[str, Any] = {}
    failed = False
    for config in configs:
        from core.tasks.model_rows import add_model

        if not args.json:
            out.print(f"[bold]{escape(config.name)}[/]: {_summary(config)}", highlight=False)

        def on_probe(task_id: str, axes: dict[str, int], name: str = config.name) -> None:
            if not args.json:
                err.print(
                    f"[dim]  {escape(name)}: checking {escape(task_id)} at {_label(axes)}[/]",
                    highlight=False,
                )

        changes = add_model(
            config,
            [t for t in tasks if not args.task or t.id in args.task],
            dry_run=args.dry_run,
            into="visible" if args.visible else "models",
            probe=not args.no_probe,
            on_probe=on_probe,
            probers=probers,
        )
        failed = failed or any(c.error for c in changes)
        report["models"].append({**config.to_json(), "tasks": [c.to_json() for c in changes]})
        if not args.json:
            _print_changes(out, err, changes, args.dry_run)
        if not args.dry_run:
            tasks = discover(root)  # the next model sees the rows this one wrote
    if serving is not None:
        report["coverage"] = _coverage(args, out, err, configs, tasks, serving)
    if args.json:
        print(json.dumps(report))
    return EXIT_FAILED if failed else EXIT_PASSED


def _label(axes: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in axes.items())


def _summary(config: Any) -> str:
    a = config.arch
    layers = ", ".join(f"{n} {t}" for t, n in a.attention.items())
    mlp = f"{a.dense_layers} dense" + (
        f", {a.moe_layers} MoE ({a.experts} experts, top-{a.top_k})" if a.moe_layers else ""
    )
    return f"{a.model_type}, hidden {a.hidden}; attention: {layers}; MLP: {mlp}; {len(config.ops)} operations"


def _print_changes(out: Console, err: Console, changes: list[Any], dry_run: bool) -> None:
    table = plain_table(title="would add" if dry_run else "added", title_justify="left")
    table.add_column("task", no_wrap=True)
    table.add_column("rows", overflow="fold")
    for c in changes:
        if c.added:
            table.add_row(c.task_id, "\n".join(f"{_label(r.axes)}  ({r.note})" for r in c.added))
    if table.row_count:
        out.print(table)
    else:
        out.print("no task gained a row")
    for c in changes:
        for why in ([c.reason] if c.reason else []) + c.skipped:
            out.print(f"[dim]skipped {escape(c.task_id)}: {escape(why)}[/]", highlight=False)
        if c.error:
            err.print(
                f"[red]error:[/] {escape(c.task_id)}: {escape(c.error)}",
                highlight=False,
                soft_wrap=True,
            )


def _coverage(
    args: argparse.Namespace,
    out: Console,
    err: Console,
    configs: list[Any],
    tasks: list[Any],
    serving: Any,
) -> dict[str, Any]:
    from core.devices.device import PACKAGE_ROOT
    from core.tasks.model_coverage import coverage, h200_peaks, table, write_table

    peaks = h200_peaks(serving.gpu)
    covs = [coverage(c, tasks, serving, peaks) for c in configs]
    text = table(covs, serving)
    doc = args.docs or (PACKAGE_ROOT / "docs" / "tasks.md")
    written = False
    # The page's table is the bundled zoo's: another zoo file writes it only where --docs says.
    if not args.dry_run and doc.is_file() and (args.zoo is True or args.docs is not None):
        written = write_table(doc, text)
        if not written and not args.json:
            err.print(
                f"[yellow]note:[/] {escape(str(doc))} has no coverage markers: the table was not written",
                highlight=False,
            )
    if not args.json:
        out.print(text, highlight=False, markup=False)
        if written:
            out.print(f"coverage table written to {escape(str(doc))}", highlight=False)
    return {
        "serving": serving.to_json(),
        "models": [c.to_json() for c in covs],
        "written": str(doc) if written else None,
    }
