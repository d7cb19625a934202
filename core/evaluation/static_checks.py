"""The static checks of `arena tasks validate`: the files and their entries, the hidden sets, the
FLOP and byte formulas on every workload, and the roofline on an H200. Nothing here runs the
task's code."""

from __future__ import annotations

import ast
import math
from pathlib import Path

from core.evaluation.validate_report import ROOFLINE_DEVICE, CheckResult
from core.harness.pysource import parse_module
from core.model.task import Task
from core.model.workload import Workload


def check_external(task: Task) -> CheckResult:
    from core.tasks.external import check_folder

    problems = check_folder(task.path, task.external)
    if problems:
        return CheckResult("external_files", False, "; ".join(problems))
    return CheckResult(
        "external_files",
        True,
        f"commands present and every file they name exists (scored by {task.external.rules}'s rules, on {task.external.requires.value} devices)",
    )


def _defines(path: Path, name: str) -> bool:
    """A top-level def, assignment or import of `name` (the way evaluate.check_candidate looks)."""
    tree = parse_module(path.read_bytes(), str(path))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) == name for a in node.names
        ):
            return True
    return False


def check_files(task: Task) -> CheckResult:
    # A multi-rank task's reference computes every rank's outputs at once, without communication.
    reference = "run_all" if task.multi_rank else "run"
    entries = {
        "reference.py": reference,
        "baseline.py": "run",
        "starter.py": "run",
        "inputs.py": "make_inputs",
        "check.py": "check",
    }
    problems = []
    for file, entry in entries.items():
        path = task.file(file)
        if not path.is_file():
            if file in ("inputs.py", "check.py"):
                continue  # optional
            problems.append(f"{file} is missing")
            continue
        try:
            if not _defines(path, entry):
                problems.append(f"{file} defines no `{entry}`")
        except SyntaxError as exc:
            problems.append(f"{file} line {exc.lineno}: {exc.msg}")
    if problems:
        return CheckResult(
            "files", False, "; ".join(problems) + ": see docs/task-format.md for each file's entry"
        )
    extra = [f for f in ("inputs.py", "check.py") if task.file(f).is_file()]
    what = (
        "reference defines run_all, baseline and starter define run"
        if task.multi_rank
        else "reference, baseline and starter define run"
    )
    return CheckResult(
        "files", True, what + (f"; {', '.join(extra)} define their entries" if extra else "")
    )


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def check_hidden_sets(task: Task) -> CheckResult:
    """The loader enforces this; re-stated here so the report says it was checked."""
    problems = []
    for where, sets in (("workloads", task.gpu), ("workloads.cpu", task.cpu)):
        visible = {w.label for w in sets.visible}
        repeats = [w.label for w in sets.hidden.fixed if w.label in visible]
        if repeats:
            problems.append(
                f"{where}.hidden.fixed repeats visible workload(s) {', '.join(repeats)}"
            )
        if all(_power_of_two(v) for w in sets.hidden.fixed for v in w.axes.values()):
            problems.append(
                f"{where}.hidden.fixed has only powers of two: add a workload with an irregular size (e.g. 77)"
            )
    if problems:
        return CheckResult("hidden_sets", False, "; ".join(problems))
    return CheckResult(
        "hidden_sets",
        True,
        f"GPU and CPU hidden sets ({len(task.gpu.hidden.fixed)} + {len(task.cpu.hidden.fixed)} fixed) differ from the visible ones and hold non-powers of two",
    )


def _all_workloads(task: Task) -> list[tuple[str, Workload]]:
    """Every workload a formula can meet: the fixed ones, each fixed hidden one with its drawn
    axes at both ends of their ranges, and the model rows."""
    found: list[tuple[str, Workload]] = []
    for where, sets in (("workloads", task.gpu), ("workloads.cpu", task.cpu)):
        found += [(f"{where}.visible {w.label}", w) for w in sets.visible]
        found += [(f"{where}.hidden {w.label}", w) for w in sets.hidden.fixed]
        if sets.hidden.draw is not None:
            for w in sets.hidden.fixed:
                for end in (0, 1):
                    axes = {**w.axes, **{a: r[end] for a, r in sets.hidden.draw.ranges.items()}}
                    found.append((f"{where}.hidden.draw {Workload(axes).label}", Workload(axes)))
    found += [(f"workloads.models {w.label}", w) for w in task.model_rows]  # add-model's rows
    if (
        task.world_size is not None
    ):  # formulas of a multi-rank task meet every world size it supports
        found = [
            (f"{where} W={n}", task.at_world(w, n))
            for where, w in found
            for n in task.world_size.sizes
        ]
    return found


def check_formulas(task: Task) -> CheckResult:
    problems = []
    formulas = [("flops", task.flops_for), ("bytes", task.bytes_for)]
    if task.collective is not None:
        formulas.append(("collective.bytes", task.collective_bytes))
    for where, w in _all_workloads(task):
        for key, fn in formulas:
            try:
                value = fn(w)
            except (ArithmeticError, ValueError) as exc:
                problems.append(f"`{key}: {_formula(task, key)}` fails at {where} ({exc})")
                continue
            # A pure data move (a cache write) does no arithmetic: flops may be 0, bytes never.
            if not math.isfinite(value) or value < 0 or (key != "flops" and value == 0):
                problems.append(f"`{key}: {_formula(task, key)}` is {value:g} at {where}")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return CheckResult(
            "formulas",
            False,
            f"{problems[0]}{more}: bytes must be positive and flops non-negative on every workload",
        )
    return CheckResult(
        "formulas",
        True,
        f"flops and bytes are finite (bytes positive) on all {len(_all_workloads(task))} workloads (draw ranges at both ends)",
    )


def _formula(task: Task, key: str) -> str:
    return (
        task.collective.bytes
        if key == "collective.bytes" and task.collective
        else getattr(task, key)
    )


def roofline_device():
    """The H200's DeviceInfo as a probe would build it: the peaks table's figures, measured
    where recorded, else spec (what scoring uses for speed of light)."""
    from core.devices.device import info_from_probe

    key, model = ROOFLINE_DEVICE
    info = info_from_probe(key, {"type": "cuda", "vendor": "nvidia", "model": model})
    if info.sol_peaks is None:
        raise LookupError(f"core/data/peaks.yaml has no `{key}` entry matching {model!r}")
    return info


def check_roofline(task: Task, baseline_us: dict[str, float] | None = None) -> CheckResult:
    """Speed of light on an H200 is a finite positive time on every GPU workload, and below the
    baseline's measured median where one is given (`baseline_us`, by workload label)."""
    from core.evaluation.job import roofline_for

    info = roofline_device()
    times, problems = [], []
    workloads = list(task.gpu.visible) + list(task.gpu.hidden.fixed)
    if (
        task.world_size is not None
    ):  # a collective's speed of light at the largest world it supports
        workloads = [task.at_world(w, max(task.world_size.sizes)) for w in workloads]
    for w in workloads:
        roof = roofline_for(task, w, info)
        if roof is None or not math.isfinite(roof) or roof <= 0:
            peak = (
                f"{info.sol_peaks.link_gbps} GB/s link"
                if task.peak == "link"
                else f"{info.sol_peaks.compute_tflops(task.peak)} TFLOP/s"
            )  # type: ignore[union-attr]
            problems.append(
                f"{w.label}: roofline {roof} (peak `{task.peak}` on {info.peaks_key}: {peak})"
            )
            continue
        times.append(roof)
        base = (baseline_us or {}).get(w.label)
        if base is not None and base <= roof:
            problems.append(
                f"{w.label}: the baseline's measured {base:.2f} µs is at or below the roofline {roof:.2f} µs: the flops/bytes formulas overcount"
            )
    if problems:
        return CheckResult("roofline", False, "; ".join(problems[:3]))
    return CheckResult(
        "roofline",
        True,
        f"{info.peaks_key} ({info.sol_peaks.source}) roofline {min(times):.3g}–{max(times):.3g} µs over {len(times)} GPU workloads",  # type: ignore[union-attr]
    )
