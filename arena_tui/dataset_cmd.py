"""`arena dataset export --format trl|verl`: the task catalogue as a trainer's prompt dataset."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arena_tui.tasks_cmd import tasks_dir_option
from core.model.result import EXIT_BAD_INPUT, EXIT_PASSED


def register(sub: argparse._SubParsersAction) -> None:
    ds = sub.add_parser(
        "dataset", help="write the tasks as a prompt dataset for a trainer (TRL, verl)"
    )
    dsub = ds.add_subparsers(dest="dataset_command", metavar="SUBCOMMAND", required=True)
    p = dsub.add_parser(
        "export", help="one prompt row per task: JSON lines, or parquet for a .parquet file"
    )
    p.add_argument(
        "--format",
        required=True,
        choices=("trl", "verl"),
        help="the columns of TRL's GRPOTrainer or of verl's RL datasets",
    )
    p.add_argument(
        "--out", "-o", type=Path, help="the file to write (default: kernel_arena_<format>.jsonl)"
    )
    p.add_argument(
        "--device",
        default="cuda:0",
        help="the device the prompts describe (its visible shapes: cpu has smaller ones; default cuda:0)",
    )
    p.add_argument(
        "--tasks",
        nargs="*",
        metavar="ID",
        help="task ids (default: every task, bundled or --tasks-dir)",
    )
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="rows per task (default 1)")
    tasks_dir_option(p, "a folder of task folders (imported ones too)")
    p.set_defaults(func=_export)


def _export(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.rl.adapters.dataset import rows, write
    from core.tasks.discovery import discover, find_task
    from core.tasks.fields import TaskError, UnknownTaskError

    if args.repeat < 1:
        err.print(
            "[red]error:[/] --repeat: give a positive number of rows per task", highlight=False
        )
        return EXIT_BAD_INPUT
    try:
        tasks = (
            [find_task(t, args.tasks_dir) for t in args.tasks]
            if args.tasks
            else discover(args.tasks_dir)
        )
    except (UnknownTaskError, TaskError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    # Multi-rank tasks need a process group per completion: they are left out of single-completion datasets.
    single = [t for t in tasks if not t.multi_rank]
    path = args.out or Path(f"kernel_arena_{args.format}.jsonl")
    try:
        write(rows(single, args.format, args.device, args.repeat), path)
    except ImportError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    skipped = len(tasks) - len(single)
    out.print(
        f"wrote {len(single) * args.repeat} {args.format} rows ({len(single)} tasks) to {escape(str(path))}"
        + (f"; left out {skipped} multi-rank task(s)" if skipped else ""),
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_PASSED
