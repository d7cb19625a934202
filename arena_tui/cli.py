"""The `arena` command line.

`arena` with no arguments evaluates three bundled tasks' starters on this machine's GPU, or on
`sim:h200` (predicted H200 times) where there is none, and prints the scores (in a terminal: the
app on the same run); `arena eval` scores one candidate; `arena tasks list|show|validate|new|add-model`
browses, checks, creates and extends the tasks (arena_tui/tasks_cmd.py).
Exit codes: 0 passed, 1 a stage failed or an integrity violation, 2 bad input or a set-up to
fix (no working sandbox without `--unsandboxed`, a bundled file that no longer matches the
manifest), 3 an infrastructure fault. Textual and asyncssh (later issues) are imported lazily here, so that
`arena eval` runs on a GPU box that has only torch and triton.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arena_tui import local_devices, render
from core import __version__
from core.devices.device import DeviceError, ProbeError
from core.model.result import EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE, EXIT_PASSED, Result
from core.orchestration.runfile import DEMO_TASKS
from core.tasks.discovery import discover, find_task
from core.tasks.fields import TaskError, UnknownTaskError

# Command modules that add their own subcommands: each has `register(subparsers)`, which adds
# parsers whose `func(args, out, err) -> int` runs the command. They import heavy or optional
# libraries (asyncssh, textual) inside `func`, never at import.
UNSANDBOXED_FLAG = "--unsandboxed"
EVALUATING = (
    None,
    "demo",
    "eval",
    "run",
    "serve",
)  # commands that run candidates or agents on this machine (and `compare --task`)
COMMAND_MODULES = (
    "arena_tui.tasks_cmd",
    "arena_tui.runs_cmd",
    "arena_tui.hosts_cmd",
    "arena_tui.devices_cmd",
    "arena_tui.run_cmd",
    "arena_tui.compare_cmd",
    "arena_tui.leaderboard_cmd",
    "arena_tui.check_cmd",
    "arena_tui.serve_cmd",
    "arena_tui.import_cmd",
    "arena_tui.dataset_cmd",
)


def _error(err: Console, exc: BaseException) -> None:
    """One line, never wrapped, never a traceback."""
    err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="arena",
        description="Kernel Arena: score GPU kernels honestly, on any vendor's device. `arena` alone: the default run "
        "(three bundled tasks' starters on this machine's GPU, else sim:h200), in the app in a terminal, printed in a pipe.",
        epilog="Exit codes: 0 passed, 1 a stage failed or an integrity violation, 2 bad input (an unknown task or device, a GPU this "
        "machine does not have), 3 an infrastructure fault. Commands that print tables take --json; an error is then one JSON object.",
    )
    p.add_argument("--version", action="version", version=f"arena {__version__}")
    p.add_argument(
        "--tasks-dir",
        type=Path,
        help="a folder of task folders to use instead of the bundled tasks",
    )
    p.add_argument(
        "--headless",
        action="store_true",
        help="`arena` alone: print the demo's scores instead of opening the app",
    )
    p.add_argument(
        "--db",
        type=Path,
        metavar="PATH",
        help="the results store (default: $ARENA_DB, else ${XDG_DATA_HOME:-~/.local/share}/kernel-arena/arena.db)",
    )
    p.add_argument(
        "--unsandboxed",
        action="store_true",
        help="run candidates without the sandbox (as ARENA_SANDBOX=off), anywhere on the command line; recorded in every result (docs/sandbox.md)",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo", help="evaluate the bundled tasks' starters (what `arena` alone does)"
    )
    demo.add_argument(
        "--device",
        help="default: this machine's first GPU, else sim:h200 (predicted H200 times); or cpu, cuda:N, xpu:N, sim:<gpu>",
    )
    demo.add_argument(
        "--all", action="store_true", help="every bundled task, not only the three quick ones"
    )
    demo.add_argument(
        "--task",
        action="append",
        metavar="ID",
        help="only this task's starter (repeat for more); e.g. --task gemm/bf16_gemm",
    )
    demo.add_argument(
        "--json", action="store_true", help="print one JSON list of result objects and nothing else"
    )

    ev = sub.add_parser("eval", help="evaluate one candidate on one task")
    ev.add_argument(
        "--task", required=True, help="a task id such as gemm/bf16_gemm (see `arena tasks list`)"
    )
    ev.add_argument(
        "--candidate", required=True, type=Path, help="a Python file defining run(*inputs)"
    )
    ev.add_argument(
        "--device",
        default="cpu",
        help="cpu (default), cuda:N, a device group cuda:A-B (multi-rank tasks), or xpu:N",
    )
    ev.add_argument(
        "--world-size",
        type=int,
        metavar="N",
        help="ranks for a multi-rank task (comm/, moe/dispatch, …); default: the task's CPU size on cpu, every GPU of the group on GPUs",
    )
    ev.add_argument(
        "--json", action="store_true", help="print exactly one JSON result object and nothing else"
    )
    ev.add_argument(
        "--seed",
        type=int,
        help="the secret seed (hidden draws, inputs); default: a fresh random one",
    )
    ev.add_argument(
        "--workdir", type=Path, help="keep the evaluation's files (job, logs) in this folder"
    )
    ev.add_argument(
        "--no-store", action="store_true", help="do not record the result in the results store"
    )
    ev.add_argument(
        "--profile",
        choices=("full", "train"),
        default="full",
        help="full (default: every timed workload, leaderboards) or train (one timed workload per regime, shorter limits: docs/evaluation.md)",
    )
    ev.add_argument(
        "--baseline-impl",
        metavar="NAME",
        help="time against this one of the task's `baselines:` (`arena tasks show` lists them; an imported KernelBench task has eager and torch_compile); the result records it as baseline_impl",
    )

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from core.evaluation.job import SettingError, timing_events, timing_placement
    from core.evaluation.sandbox import SWITCH, SandboxUnavailable
    from core.tasks.manifest import ManifestMismatch

    argv = list(sys.argv[1:] if argv is None else argv)
    if (
        UNSANDBOXED_FLAG in argv[: argv.index("--") if "--" in argv else len(argv)]
    ):  # any subcommand's, not only the top level's
        argv.remove(UNSANDBOXED_FLAG)
        os.environ[SWITCH] = "off"
    args = _parser().parse_args(argv)
    out, err = Console(), Console(stderr=True)
    if getattr(args, "json", False):
        err = _JsonErrors(args)  # scripts asked for JSON: an error is one JSON object on stdout
    try:
        if args.command in EVALUATING or (
            args.command == "compare" and getattr(args, "task", None)
        ):
            from core.evaluation.sandbox import require

            require()  # no sandbox and no --unsandboxed: one line, exit 2, before anything starts
            timing_placement()  # ARENA_TIMING_PLACEMENT misspelt: the same, before anything starts
            timing_events()  # ... and ARENA_TIMING_EVENTS
        if args.command is None and _interactive(args):
            return _app(args, out, err)
        if args.command in (None, "demo"):
            return _demo(args, out)
        if args.command == "eval":
            return _eval(args, out, err)
        if hasattr(args, "func"):
            return args.func(args, out, err)
    except (TaskError, UnknownTaskError, DeviceError) as exc:
        _error(err, exc)
        return EXIT_BAD_INPUT
    except (
        SandboxUnavailable,
        ManifestMismatch,
        SettingError,
    ) as exc:  # a set-up to fix: no sandbox, a changed bundled file, an environment setting
        _error(err, exc)
        return EXIT_BAD_INPUT
    except ProbeError as exc:
        _error(err, exc)
        return EXIT_INFRASTRUCTURE
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    return EXIT_PASSED


class _JsonErrors(Console):
    """The error console of a `--json` command: `error: ...` lines become one JSON object on
    stdout, `{"error": "..."}`, so a script reading stdout always gets JSON (the exit code says
    which kind: 2 bad input, 3 infrastructure)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(stderr=True)

    def print(self, *objects, **kwargs) -> None:  # type: ignore[no-untyped-def, override]
        from rich.text import Text

        message = " ".join(Text.from_markup(str(o)).plain for o in objects)
        if not message.startswith("error: "):
            super().print(*objects, **kwargs)
            return
        sys.stdout.write(json.dumps({"error": message.removeprefix("error: ")}) + "\n")
        sys.stdout.flush()


def _interactive(args: argparse.Namespace) -> bool:
    from arena_tui.app.launch import interactive  # Textual is imported only when a person watches

    return interactive(args.headless)


def _app(args: argparse.Namespace, out: Console, err: Console) -> int:
    """`arena` alone in a terminal: the app on the embedded default run (DEFAULT_RUN), on this
    machine's GPU or sim:h200 (never the cpu device's interpreted times)."""
    from arena_tui.app import launch
    from arena_tui.wiring import executor_factory
    from core.store.db import StoreError

    try:
        return launch.run_default(
            args.tasks_dir, args.db, executor_factory(None), device=local_devices.default_device()
        )
    except StoreError as exc:
        _error(err, exc)
        return EXIT_INFRASTRUCTURE


def _eval(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.evaluation.evaluator import BadCandidate, Evaluator, check_candidate
    from core.evaluation.job import WorldSizeError, world_size_for

    task = find_task(args.task, args.tasks_dir)
    local_devices.require_here(args.device)
    try:
        check_candidate(args.candidate, task)
        if args.baseline_impl and task.baseline_impl(args.baseline_impl) is None:
            names = ", ".join(b.impl for b in task.baselines)
            raise BadCandidate(
                f"--baseline-impl {args.baseline_impl}: {task.id} has no such baseline; its baselines: {names}"
            )
    except BadCandidate as exc:
        _error(err, exc)
        return EXIT_BAD_INPUT
    progress = None if args.json else render.StageProgress(out, task)
    with Evaluator(
        args.device, workdir=args.workdir, baseline_impl=args.baseline_impl
    ) as evaluator:
        try:
            world = world_size_for(task, evaluator.info, args.world_size)
        except WorldSizeError as exc:
            _error(err, exc)
            return EXIT_BAD_INPUT
        if progress:
            progress.header(evaluator.info, args.candidate, world)
        result = evaluator.evaluate(
            task,
            args.candidate,
            seed=args.seed,
            on_event=progress,
            world_size=world,
            profile=args.profile,
        )
    stored = (
        None if args.no_store else _record(args, task.family, result)
    )  # written before it is shown
    if args.json:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
    else:
        render.result_summary(out, result)
    if stored is not None:
        (err if args.json or stored.startswith("not recorded") else out).print(
            stored, highlight=False, soft_wrap=True
        )
    return result.exit_code


def _record(args: argparse.Namespace, family: str, result: Result) -> str:
    """Keep an `arena eval` result in the store as a run named `eval` with one job; say where."""
    from core.store.db import Store, StoreError

    try:
        with Store.open(args.db) as store:
            spec = {
                "command": "eval",
                "task": result.task_id,
                "candidate": str(args.candidate.resolve()),
                "device": args.device,
            }
            run_id = store.create_run("eval", spec)
            job = store.add_job(
                run_id,
                task_id=result.task_id,
                family=family,
                device_id=result.device.get("id", args.device),
                candidate=args.candidate,
                candidate_sha256=result.candidate_sha256,
            )
            store.record_result(job, result)
            store.finish_run(run_id)
    except StoreError as exc:
        return f"not recorded: {escape(str(exc))}"
    return f"recorded in run {run_id}"


def _demo(args: argparse.Namespace, out: Console) -> int:
    from core.evaluation.evaluator import Evaluator

    device = (
        getattr(args, "device", None) or local_devices.default_device()
    )  # `arena` alone has no --device
    local_devices.require_here(device)
    as_json = getattr(args, "json", False)
    tasks = discover(args.tasks_dir)
    every = len(tasks)
    chosen = getattr(args, "task", None)
    if chosen:  # an unknown id: UnknownTaskError with the ids it may have meant (exit 2)
        tasks = [find_task(t, args.tasks_dir) for t in dict.fromkeys(chosen)]
    elif args.tasks_dir is None and not getattr(args, "all", False):
        tasks = [t for t in tasks if t.id in DEMO_TASKS]
    results: list[Result] = []
    if as_json:
        out = Console(stderr=True)  # progress on stderr; stdout is the one JSON list
    more = (
        f" of {every} ([bold]arena demo --all[/] for every one, [bold]--task ID[/] for one)"
        if len(tasks) < every and not chosen
        else ""
    )
    out.print(
        f"[bold]Kernel Arena {__version__}[/]: evaluating the starters of {len(tasks)}{more} tasks on [bold]{device}[/]"
    )
    with Evaluator(device) as evaluator:
        out.print(f"device: {render.device_line(evaluator.info)}\n")
        for task in tasks:
            progress = render.StageProgress(out, task, compact=True)
            results.append(evaluator.evaluate(task, task.file("starter.py"), on_event=progress))
    if as_json:
        sys.stdout.write(json.dumps([r.to_json() for r in results]) + "\n")
    else:
        out.print()
        render.scores_table(out, results)
    return max((r.exit_code for r in results), default=EXIT_PASSED)


if __name__ == "__main__":
    sys.exit(main())
