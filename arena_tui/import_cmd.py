"""`arena import kernelbench|agentkernelarena PATH --out DIR`: another benchmark's task set as arena tasks.

Prints one line per problem as it goes (in a pipe too), then what converted per level, why the
rest did not, and, with `--validate`, which converted tasks pass `arena tasks validate`'s
checks that need no harness evaluation. docs/interop.md has the details.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from core.importers.kb_sizes import CPU_CAP_BYTES, DEFAULT_DEVICE_GB
from core.model.result import EXIT_BAD_INPUT, EXIT_PASSED


def _common(p: argparse.ArgumentParser, example: str) -> None:
    """Options both importers take."""
    p.add_argument(
        "--only",
        metavar="GLOB,…",
        default="",
        help=f"only the problems whose path matches one of these patterns, e.g. `{example}`",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=min(2, os.cpu_count() or 1),
        metavar="N",
        help="problems converted at once, one CPU each (default: 2, or 1 on a one-CPU machine); the outcome does not depend on it",
    )


def register(sub: argparse._SubParsersAction) -> None:
    imp = sub.add_parser("import", help="write another benchmark's problems as arena task folders")
    isub = imp.add_subparsers(dest="import_command", metavar="BENCHMARK", required=True)
    p = isub.add_parser(
        "kernelbench", help="a KernelBench checkout: one task per problem (levels 1-4)"
    )
    p.add_argument(
        "path",
        type=Path,
        metavar="PATH",
        help="the root of a KernelBench checkout (the folder holding KernelBench/level1/)",
    )
    p.add_argument(
        "--out",
        "-o",
        type=Path,
        required=True,
        metavar="DIR",
        help="the folder to write task folders into (DIR/kernelbench/<task>/); use it with --tasks-dir",
    )
    p.add_argument(
        "--levels",
        default="1,2,3,4",
        metavar="L,…",
        help="which levels to import (default 1,2,3,4)",
    )
    p.add_argument(
        "--precision",
        choices=("fp32", "fp16", "bf16"),
        default="fp32",
        help="the problems' precision, as KernelBench's --precision (default fp32)",
    )
    p.add_argument(
        "--device-memory",
        type=float,
        default=DEFAULT_DEVICE_GB,
        metavar="GB",
        help=f"the target GPU's memory: hidden workloads move at most 1/8 of it (default {DEFAULT_DEVICE_GB:g}, KernelBench's H100)",
    )
    p.add_argument(
        "--cpu-memory",
        type=float,
        default=CPU_CAP_BYTES / 1e6,
        metavar="MB",
        help=f"a CPU workload moves less than this (default {CPU_CAP_BYTES / 1e6:g}); a problem whose parameters alone are more has no CPU workload and is not converted",
    )
    _common(p, "level1/19_*,level2/*")
    p.add_argument(
        "--validate",
        action="store_true",
        help="then check each converted task (schema, reference, rule's teeth; no harness evaluation)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON report and nothing else")
    p.set_defaults(func=_kernelbench)
    p = isub.add_parser(
        "agentkernelarena",
        help="an AgentKernelArena checkout: its template Triton tasks, the rest reported",
    )
    p.add_argument(
        "path",
        type=Path,
        metavar="PATH",
        help="the root of an AgentKernelArena checkout (the folder holding tasks/)",
    )
    p.add_argument(
        "--out",
        "-o",
        type=Path,
        required=True,
        metavar="DIR",
        help="the folder to write task folders into (DIR/agentkernelarena/<task>/); use it with --tasks-dir",
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="then check each converted task (schema, reference, rule's teeth; no harness evaluation)",
    )
    p.add_argument(
        "--no-external",
        action="store_true",
        help="report the tasks that do not convert instead of writing them as external tasks (their own commands, scored by their own rules)",
    )
    _common(p, "triton2triton/vllm/*")
    p.add_argument("--json", action="store_true", help="print one JSON report and nothing else")
    p.set_defaults(func=_agentkernelarena)


def _kernelbench(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.importers.kernelbench import Options, import_kernelbench, level_of

    try:
        levels = tuple(int(x) for x in args.levels.split(",") if x.strip())
    except ValueError:
        err.print(
            f"[red]error:[/] --levels `{escape(args.levels)}`: give level numbers separated by commas, e.g. 1,2",
            highlight=False,
        )
        return EXIT_BAD_INPUT
    return _import(
        args,
        out,
        err,
        lambda progress: import_kernelbench(
            args.path,
            args.out,
            Options(
                precision=args.precision,
                levels=levels,
                device_gb=args.device_memory,
                workers=max(1, args.jobs),
                only=_patterns(args.only),
                cpu_mb=args.cpu_memory,
            ),
            on_problem=progress,
        ),
        level_of,
    )


def _agentkernelarena(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.importers.agentkernelarena import Options, category_of, import_agentkernelarena

    options = Options(
        external=not args.no_external, workers=max(1, args.jobs), only=_patterns(args.only)
    )
    return _import(
        args,
        out,
        err,
        lambda progress: import_agentkernelarena(args.path, args.out, options, on_task=progress),
        category_of,
    )


def _patterns(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _import(args: argparse.Namespace, out: Console, err: Console, run: Any, group_of: Any) -> int:
    """Run an importer with a line per problem, then the summary (or one JSON report)."""

    def progress(i: int, n: int, source: str, outcome: object) -> None:
        if args.json:
            return
        reason = getattr(outcome, "reason", None)
        mark = "[red]✗[/]" if reason else "[green]✓[/]"
        external = (
            " (external: its own commands and rules)"
            if getattr(outcome, "mode", "native") == "external"
            else ""
        )
        tail = (
            f"  {escape(reason)}"
            if reason
            else f"  → {escape(getattr(outcome, 'task_id', ''))}{external}"
        )
        out.print(f"{mark} [{i}/{n}] {escape(source)}{tail}", highlight=False, soft_wrap=True)

    try:
        report = run(progress)
    except (FileNotFoundError, ValueError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    invalid: dict[str, str] = {}
    if args.validate and report.converted:
        invalid = _validate(
            [Path(c.path) for c in report.converted], out if not args.json else None
        )
    if args.json:
        data = report.to_json() | {"validated": bool(args.validate), "invalid": invalid}
        print(json.dumps(data, indent=2))
        return EXIT_PASSED
    out.print()
    for group, (done, total) in report.by_group(group_of).items():
        external = sum(
            1 for c in report.converted if c.mode == "external" and group_of(c.source) == group
        )
        out.print(
            f"{group}: {done} of {total} converted"
            + (f" ({external} as external tasks)" if external else ""),
            highlight=False,
        )
    for kind, count in report.reasons().items():
        out.print(f"  not converted ({kind}): {count}", highlight=False)
    if args.validate:
        out.print(
            f"validated: {len(report.converted) - len(invalid)} of {len(report.converted)} converted tasks pass"
            + ("; failures above" if invalid else ""),
            highlight=False,
        )
    out.print(
        f"tasks written under {escape(str(Path(args.out) / report.benchmark))}; use them with --tasks-dir {escape(str(args.out))}",
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_PASSED


def _validate(folders: list[Path], out: Console | None) -> dict[str, str]:
    """Each converted task through `arena tasks validate --no-eval`'s checks; task id -> why not."""
    from core.evaluation.validate import validate_tasks
    from core.evaluation.validate_report import ValidateOptions

    invalid: dict[str, str] = {}

    def done(report: object) -> None:
        failed = report.failed  # type: ignore[attr-defined]
        if failed:
            invalid[report.task_id] = "; ".join(f"{c.name}: {c.message}" for c in failed)  # type: ignore[attr-defined]
        if out is not None:
            mark = "[red]✗[/]" if failed else "[green]✓[/]"
            why = f"  {escape(invalid[report.task_id])}" if failed else ""  # type: ignore[attr-defined]
            out.print(
                f"{mark} validate {escape(report.task_id)}{why}", highlight=False, soft_wrap=True
            )  # type: ignore[attr-defined]

    validate_tasks(folders, ValidateOptions(evaluate=False), on_report=done)
    return invalid
