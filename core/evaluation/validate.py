"""`arena tasks validate`: deterministic checks that a task folder is a fair, working task.

No agent, no model: the loader's schema, the files and their entries, the reference on every
CPU workload, the baseline and the starter through the real harness (CPU device, visible and
hidden CPU workloads), and the checks that the correctness rule has teeth: an all-zeros, a
constant and a random output must fail it (through the very rule the harness applies:
core.harness.checking.judge, with the task's check.py where it has one), and every tensor input
must change some output. Then the workload sets, the FLOP and byte formulas, the roofline on an
H200, and the CPU evaluation's time against a budget.

Each check gives a `CheckResult`; a task's are gathered in a `TaskReport`
(core/evaluation/validate_report.py). This module runs them in order: the static checks are
core/evaluation/static_checks.py, those that run the task's code core/evaluation/code_checks.py,
the two through the harness are here. Nothing here prints: the command line renders the reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from core.evaluation.code_checks import CodeChecks, one_line
from core.evaluation.static_checks import (
    check_external,
    check_files,
    check_formulas,
    check_hidden_sets,
    check_roofline,
)
from core.evaluation.validate_report import CheckResult, TaskReport, ValidateOptions
from core.model.task import Task
from core.tasks.fields import TaskError
from core.tasks.spec import load_task

if TYPE_CHECKING:
    from core.evaluation.evaluator import Evaluator
    from core.model.result import Result


OnCheck = Callable[[str, str], None]  # (task id, check name) as each check starts


# --- entry points ----------------------------------------------------------------------------


def validate_tasks(
    task_dirs: list[Path],
    options: ValidateOptions = ValidateOptions(),
    evaluator: Evaluator | None = None,
    on_check: OnCheck | None = None,
    on_report: Callable[[TaskReport], None] | None = None,
) -> list[TaskReport]:
    """Validate each task folder; one CPU evaluator (a warm harness) serves them all."""
    own = None
    if evaluator is None and options.evaluate:
        from core.evaluation.evaluator import Evaluator

        evaluator = own = Evaluator("cpu")
    try:
        reports = []
        for folder in task_dirs:
            report = validate_task(folder, options, evaluator, on_check)
            reports.append(report)
            if on_report:
                on_report(report)
        return reports
    finally:
        if own is not None:
            own.close()


def validate_task(
    task_dir: Path,
    options: ValidateOptions = ValidateOptions(),
    evaluator: Evaluator | None = None,
    on_check: OnCheck | None = None,
) -> TaskReport:
    task_dir = Path(task_dir).resolve()
    task_id = f"{task_dir.parent.name}/{task_dir.name}"
    report = TaskReport(task_id=task_id, path=str(task_dir))
    started = time.monotonic()

    def run(name: str, fn: Callable[[], CheckResult]) -> CheckResult:
        if on_check:
            on_check(task_id, name)
        t0 = time.monotonic()
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - a task's code may raise anything: that is a finding
            result = CheckResult(name, False, f"raised {type(exc).__name__}: {one_line(exc)}")
        result = CheckResult(
            result.name, result.passed, result.message, result.warning, time.monotonic() - t0
        )
        report.checks.append(result)
        return result

    try:
        task = load_task(task_dir)
        report.checks.append(
            CheckResult("schema", True, "task.yaml loads and every field is valid")
        )
    except TaskError as exc:
        report.checks.append(CheckResult("schema", False, str(exc)))
        report.seconds = time.monotonic() - started
        return report
    if (
        task.external is not None
    ):  # its own commands hold the shapes and the reference (core/tasks/external.py)
        run("external_files", lambda: check_external(task))
        report.seconds = time.monotonic() - started
        return report
    files = run("files", lambda: check_files(task))
    if files.passed:
        ctx = CodeChecks(task, options.seed)
        if run("reference_runs", ctx.check_reference).passed:
            run("zeros_fail", lambda: ctx.check_fabricated("zeros"))
            run("constant_fail", lambda: ctx.check_fabricated("constant"))
            run("random_fail", lambda: ctx.check_fabricated("random"))
            run("inputs_matter", ctx.check_inputs_matter)
    run("hidden_sets", lambda: check_hidden_sets(task))
    run("formulas", lambda: check_formulas(task))
    results: dict[str, Result] = {}
    cpu: dict[str, float] = {}
    if files.passed and options.evaluate and evaluator is not None:
        for which in ("baseline", "starter"):
            run(
                f"{which}_passes",
                lambda which=which: check_passes(task, which, evaluator, options, results, cpu),
            )
    # Measured baseline times exist only where the evaluations timed on a GPU.
    starter = results.get("starter")
    measured = (
        {w.label: w.baseline["median_us"] for w in starter.workloads if w.baseline.get("median_us")}
        if starter and starter.timing_kind == "measured"
        else None
    )
    run("roofline", lambda: check_roofline(task, measured))
    if starter is not None:
        run("cpu_budget", lambda: check_cpu_budget(task, starter, options, cpu.get("starter")))
    report.seconds = time.monotonic() - started
    return report


# --- checks through the harness --------------------------------------------------------------


def check_passes(
    task: Task,
    which: str,
    evaluator: Evaluator,
    options: ValidateOptions,
    results: dict[str, Result],
    cpu: dict[str, float] | None = None,
) -> CheckResult:
    """The baseline (or the starter) as a candidate: the real harness, visible and hidden
    workloads of the evaluator's device (the CPU ones on the CPU device). `cpu` gets the CPU
    seconds the harness's processes spent on it, where the executor can tell."""
    before = _cpu_clock(evaluator)
    result = evaluator.evaluate(
        task, task.file(f"{which}.py"), seed=options.seed, performance=options.performance
    )
    after = _cpu_clock(evaluator)
    if cpu is not None and after is not None:
        if before is None or before[0] != after[0]:  # a harness that started for it: all of it
            cpu[which] = after[1]
        else:
            cpu[which] = after[1] - before[1]
    results[which] = result
    name = f"{which}_passes"
    seconds = f"{result.seconds:.1f} s" if result.seconds is not None else "?"
    if result.status != "passed":
        stage = next((s for s in result.stages if s.name == result.failed_stage), None)
        detail = (stage.message or stage.status).strip().splitlines()[0] if stage else ""
        flags = f"; integrity: {result.integrity_flags[0]}" if result.integrity_flags else ""
        return CheckResult(
            name, False, f"{which}.py {result.status} at {result.failed_stage}: {detail}{flags}"
        )
    # Zero false alarms (docs/integrity.md): an honest file draws no flag, not even a review note.
    alarms = [*result.integrity_flags, *result.review_notes]
    if alarms:
        return CheckResult(
            name,
            False,
            f"{which}.py passes but is flagged ({len(alarms)}): {alarms[0]}: an honest candidate must raise no alarm",
        )
    stages = ", ".join(s.name for s in result.stages if s.status == "passed")
    return CheckResult(
        name,
        True,
        f"{which}.py passes {stages} on {result.device.get('id')} with no flag or note, in {seconds}",
    )


def _cpu_clock(evaluator: Evaluator) -> tuple[int, float] | None:
    clock = getattr(evaluator.executor, "cpu_clock", None)
    return clock() if callable(clock) else None


def check_cpu_budget(
    task: Task, starter: Result, options: ValidateOptions, cpu_s: float | None = None
) -> CheckResult:
    """The starter's CPU evaluation within the budget, in CPU seconds of the harness's processes
    (`cpu_s`): what the task asks of a machine, which load does not stretch the way it stretches
    wall time (a loaded 2-core machine took four bundled tasks past 60 s of wall time). Where the
    executor cannot tell, the wall time, said so. Without the performance stage the time is the
    measured stages plus the least the CPU timing budget spends per timed workload."""
    from core.evaluation.job import Timing

    if starter.device.get("id") != "cpu":
        return CheckResult(
            "cpu_budget", True, "not checked: the evaluations ran on a GPU", warning=True
        )
    measured, what = (
        (cpu_s, "CPU s") if cpu_s is not None else (starter.seconds or 0.0, "s of wall time")
    )
    if options.performance:
        total, how = measured, f"{measured:.1f} {what} (every stage)"
    else:
        timed = len(task.cpu.visible) + len(task.cpu.hidden.fixed)
        floor = timed * 2 * Timing.for_device("cpu").budget_ms / 1000
        total = measured + floor
        how = f"{measured:.1f} {what} (compile, correctness, hidden) + ≥ {floor:.1f} s of timing ({timed} timed workloads × 2 sides) = {total:.1f} s"
    if total > options.cpu_budget_s:
        return CheckResult(
            "cpu_budget",
            False,
            f"the starter's CPU evaluation takes {how} > {options.cpu_budget_s:g} s: make the CPU workloads smaller",
        )
    return CheckResult("cpu_budget", True, f"{how} ≤ {options.cpu_budget_s:g} s")


# --- for the command line ----------------------------------------------------------------------


def resolve_targets(ids: list[str], root: Path | str | None = None) -> list[Path]:
    """Task folders for ids (`norm/add_rmsnorm`) or folder paths; every task when none is given.
    An unknown id raises UnknownTaskError (the CLI's exit code 2)."""
    from core.tasks.discovery import task_folder, task_ids, tasks_root

    if not ids:
        return [tasks_root(root) / t for t in task_ids(root)]
    return [task_folder(task_id, root) for task_id in ids]
