"""`arena tasks validate`: deterministic checks that a task folder is a fair, working task.

No agent, no model: the loader's schema, the files and their entries, the reference on every
CPU workload, the baseline and the starter through the real harness (CPU device, visible and
hidden CPU workloads), and the checks that the correctness rule has teeth: an all-zeros, a
constant and a random output must fail it (through the very rule the harness applies:
core.harness.checking.judge, with the task's check.py where it has one), and every tensor input
must change some output. Then the workload sets, the FLOP and byte formulas, the roofline on an
H200, and the CPU evaluation's time against a budget.

Each check gives a `CheckResult`; a task's are gathered in a `TaskReport`. Nothing here prints:
the command line renders the reports.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import time
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.tasks.spec import Task, TaskError, Workload, load_task

if TYPE_CHECKING:
    import torch

    from core.evaluation.evaluator import Evaluator
    from core.model.result import Result

CPU_BUDGET_S = 60.0  # the whole CPU evaluation of a task's starter (the brief's figure)
ROOFLINE_DEVICE = ("h200", "NVIDIA H200")  # peaks-table key and the name torch reports for it
CHECK_NAMES = (  # in the order they run
    "schema",
    "files",
    "reference_runs",
    "zeros_fail",
    "constant_fail",
    "random_fail",
    "inputs_matter",
    "hidden_sets",
    "formulas",
    "baseline_passes",
    "starter_passes",
    "roofline",
    "cpu_budget",
)


@dataclass(frozen=True)
class CheckResult:
    """One check of one task. `warning`: it passed, but something could not be checked (the
    message says what and why)."""

    name: str
    passed: bool
    message: str
    warning: bool = False
    seconds: float | None = None


@dataclass
class TaskReport:
    task_id: str
    path: str
    checks: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "path": self.path,
            "passed": self.passed,
            "seconds": self.seconds,
            "checks": [asdict(c) for c in self.checks],
        }


@dataclass(frozen=True)
class ValidateOptions:
    """`seed` makes every draw (inputs, hidden workloads) reproducible; `evaluate=False` skips
    the two harness evaluations (baseline, starter) and the budget; `performance=True` runs the
    harness's performance stage too, so the budget is measured rather than estimated."""

    seed: int = 0
    evaluate: bool = True
    performance: bool = False
    cpu_budget_s: float = CPU_BUDGET_S


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
            result = CheckResult(name, False, f"raised {type(exc).__name__}: {_one_line(exc)}")
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
        ctx = _Context(task, options.seed)
        if run("reference_runs", ctx.check_reference).passed:
            run("zeros_fail", lambda: ctx.check_fabricated("zeros"))
            run("constant_fail", lambda: ctx.check_fabricated("constant"))
            run("random_fail", lambda: ctx.check_fabricated("random"))
            run("inputs_matter", ctx.check_inputs_matter)
    run("hidden_sets", lambda: check_hidden_sets(task))
    run("formulas", lambda: check_formulas(task))
    results: dict[str, Result] = {}
    if files.passed and options.evaluate and evaluator is not None:
        for which in ("baseline", "starter"):
            run(
                f"{which}_passes",
                lambda which=which: check_passes(task, which, evaluator, options, results),
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
        run("cpu_budget", lambda: check_cpu_budget(task, starter, options))
    report.seconds = time.monotonic() - started
    return report


# --- static checks ---------------------------------------------------------------------------


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
    tree = ast.parse(path.read_bytes(), filename=str(path))
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
    """Every workload a formula can meet: the fixed ones, and each fixed hidden one with its
    drawn axes at both ends of their ranges."""
    found: list[tuple[str, Workload]] = []
    for where, sets in (("workloads", task.gpu), ("workloads.cpu", task.cpu)):
        found += [(f"{where}.visible {w.label}", w) for w in sets.visible]
        found += [(f"{where}.hidden {w.label}", w) for w in sets.hidden.fixed]
        if sets.hidden.draw is not None:
            for w in sets.hidden.fixed:
                for end in (0, 1):
                    axes = {**w.axes, **{a: r[end] for a, r in sets.hidden.draw.ranges.items()}}
                    found.append((f"{where}.hidden.draw {Workload(axes).label}", Workload(axes)))
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
    from core.evaluation.evaluator import roofline_for

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


# --- checks that run the task's code in this process -----------------------------------------


def _import(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _Context:
    """The task's reference (and inputs.py, check.py) loaded once, run on CPU workloads with
    inputs drawn exactly as the harness draws them (core.harness.inputs)."""

    def __init__(self, task: Task, seed: int):
        from core.harness import checking

        self.task, self.seed = task, seed
        tag = task.id.replace("/", "_")
        # Multi-rank tasks: every call is made on `world` ranks, each with inputs of its own.
        self.world = task.world_size.cpu if task.world_size else None
        reference = _import(task.file("reference.py"), f"arena_validate_ref_{tag}")
        self.reference = reference.run_all if self.world else reference.run
        self.custom = (
            _import(task.file("inputs.py"), f"arena_validate_inputs_{tag}").make_inputs
            if task.file("inputs.py").is_file()
            else None
        )
        self.check = checking.load_check(task.path)
        self.rule = {
            "atol": task.correctness.atol,
            "rtol": task.correctness.rtol,
            "min_match": task.correctness.min_match,
        }
        self.specs = [
            {
                "name": s.name,
                "dtype": s.dtype,
                "shape": list(s.shape) if s.shape else None,
                "init": s.init,
                "value": s.value,
                "inplace_of": s.inplace_of,
            }
            for s in task.inputs
        ]
        self.out_specs = [
            {
                "name": s.name,
                "dtype": s.dtype,
                "shape": list(s.shape) if s.shape else None,
                "inplace_of": s.inplace_of,
            }
            for s in task.outputs
        ]
        self.expected: list[
            tuple[Workload, list[Any], list[torch.Tensor]]
        ] = []  # visible: (workload, inputs, reference outputs)

    def workloads(self, ws: tuple[Workload, ...]) -> list[Workload]:
        """CPU workloads as the harness runs them (with W on a multi-rank task)."""
        return [self.task.at_world(w, self.world) for w in ws] if self.world else list(ws)

    def shapes(self, w: Workload) -> dict[str, list[int]]:
        return {
            s.name: list(s.concrete_shape(w.axes))
            for s in self.task.inputs + self.task.outputs
            if s.shape is not None
        }

    def inputs(self, w: Workload, seed: int) -> list[Any]:
        """One call's inputs; on a multi-rank task a list of every rank's, each drawn as the
        harness draws it (its own seed, RANK among the axes)."""
        import torch

        from core.harness import inputs
        from core.harness.ranked_worker import rank_seed

        if not self.world:
            gen = torch.Generator("cpu").manual_seed(seed)
            return inputs.make_inputs(self.specs, w.axes, self.shapes(w), gen, self.custom)
        by_rank = []
        for r in range(self.world):
            gen = torch.Generator("cpu").manual_seed(rank_seed(seed, r))
            by_rank.append(
                inputs.make_inputs(
                    self.specs, {**w.axes, "RANK": r}, self.shapes(w), gen, self.custom
                )
            )
        return by_rank

    def run_reference(self, args: list[Any]) -> list[Any]:
        """The reference's outputs as a list; on a multi-rank task one such list per rank."""
        import torch

        with torch.no_grad():
            if not self.world:
                return _as_list(self.reference(*args))
            result = self.reference(args)
        if not isinstance(result, (tuple, list)) or len(result) != self.world:
            raise ValueError(
                f"reference.run_all returned {type(result).__name__}; it must return one output set per rank ({self.world})"
            )
        return [_as_list(r) for r in result]

    def per_rank(self, args: list[Any], outs: list[Any]) -> list[tuple[list[Any], list[Any]]]:
        """(inputs, outputs) of each rank; one pair on a single-device task."""
        return list(zip(args, outs)) if self.world else [(args, outs)]

    def check_reference(self) -> CheckResult:
        import torch

        from core.harness.inputs import output_shape

        workloads = self.workloads(self.task.cpu.visible) + self.workloads(
            self.task.cpu.hidden.fixed
        )
        t0 = time.monotonic()
        n = len(self.out_specs)
        entry = "reference.run_all" if self.world else "reference.run"
        for i, w in enumerate(workloads):
            args = self.inputs(w, self.seed + i)
            try:
                outs = self.run_reference(args)
            except Exception as exc:  # noqa: BLE001
                return CheckResult(
                    "reference_runs",
                    False,
                    f"{entry} raised on CPU workload {w.label}: {type(exc).__name__}: {_one_line(exc)}",
                )
            for rank, (_, rank_outs) in enumerate(self.per_rank(args, outs)):
                where = f"{w.label}" + (f" rank {rank}" if self.world else "")
                if len(rank_outs) < n or (self.check is None and len(rank_outs) != n):
                    return CheckResult(
                        "reference_runs",
                        False,
                        f"{entry} returned {len(rank_outs)} tensor(s) on {where}; the task declares {n} output(s)"
                        + ("" if self.check else " (extra tensors need a check.py)"),
                    )
                for spec, out in zip(self.out_specs, rank_outs):
                    if not isinstance(out, torch.Tensor):
                        return CheckResult(
                            "reference_runs",
                            False,
                            f"{entry}'s output `{spec['name']}` is a {type(out).__name__}, not a tensor",
                        )
                    want = output_shape(spec, self.shapes(w))
                    if tuple(out.shape) != want:
                        return CheckResult(
                            "reference_runs",
                            False,
                            f"{entry}'s output `{spec['name']}` has shape {tuple(out.shape)} on {where}; task.yaml declares {want}",
                        )
                    if out.is_floating_point() and not bool(
                        torch.isfinite(out.float()).all()
                    ):  # fp8 has no isfinite
                        return CheckResult(
                            "reference_runs",
                            False,
                            f"{entry}'s output `{spec['name']}` has NaN/Inf on {where}: check the inputs' init ranges",
                        )
            if i < len(self.task.cpu.visible):
                self.expected.append((w, args, outs))
        return CheckResult(
            "reference_runs",
            True,
            f"runs on all {len(workloads)} CPU workloads in {time.monotonic() - t0:.2f} s; outputs have the declared shapes and are finite",
        )

    def fabricate(
        self,
        kind: str,
        spec: dict[str, Any],
        like: torch.Tensor,
        shape: tuple[int, ...],
        gen: torch.Generator,
    ) -> torch.Tensor:
        """An output of the declared dtype and shape that a lazy candidate might return: all
        zeros; the expected output's mean everywhere (the strongest constant); or random
        values with the expected output's mean and spread (range, for integers)."""
        import torch

        from core.harness.inputs import dtype_of

        dtype = dtype_of(spec["dtype"])
        ref = like.detach().to("cpu", torch.float64)
        ref = ref[torch.isfinite(ref)] if ref.is_floating_point() else ref
        mean = float(ref.mean()) if ref.numel() else 0.0
        if kind == "zeros":
            return torch.zeros(shape, dtype=dtype)
        if dtype == torch.bool:
            if kind == "constant":
                return torch.full(shape, mean >= 0.5, dtype=dtype)
            return torch.randint(0, 2, shape, generator=gen).to(dtype)
        if not dtype.is_floating_point:
            if kind == "constant":
                return torch.full(shape, round(mean), dtype=dtype)
            low, high = (int(ref.min()), int(ref.max())) if ref.numel() else (0, 1)
            return torch.randint(low, high + 1, shape, generator=gen).to(dtype)
        if kind == "constant":
            return torch.full(shape, mean, dtype=torch.float32).to(dtype)
        std = float(ref.std()) if ref.numel() > 1 else 1.0
        return (torch.randn(shape, generator=gen, dtype=torch.float32) * (std or 1.0) + mean).to(
            dtype
        )

    def check_fabricated(self, kind: str) -> CheckResult:
        import torch

        from core.harness import checking
        from core.harness.inputs import output_shape

        name = f"{kind}_fail"
        what = {
            "zeros": "an all-zeros output",
            "constant": "a constant output (the expected mean)",
            "random": "a random output (the expected mean and spread)",
        }[kind]
        gen = torch.Generator("cpu").manual_seed(self.seed + 17)
        rejected: dict[str, list[str]] = {s["name"]: [] for s in self.out_specs}
        for w, call_args, call_expected in self.expected:
            for args, expected in self.per_rank(
                call_args, call_expected
            ):  # every rank must reject it
                outs = [
                    self.fabricate(kind, s, e, output_shape(s, self.shapes(w)), gen)
                    for s, e in zip(self.out_specs, expected)
                ]
                verdicts = checking.judge(
                    self.out_specs, outs, expected, args, self.rule, self.check
                )
                for out_name, v in verdicts.items():
                    if not v["passed"] and w.label not in rejected[out_name]:
                        rejected[out_name].append(w.label)
        labels = ", ".join(w.label for w, _, _ in self.expected)
        if self.check is not None:
            # check.py may judge outputs jointly: the call must fail, on some visible workload.
            if not any(rejected.values()):
                return CheckResult(
                    name,
                    False,
                    f"{what} passes check.py on every visible CPU workload ({labels}): check.py does not reject it",
                )
            return CheckResult(name, True, f"{what} is rejected by check.py")
        # The elementwise rule judges each output on its own: each must reject it.
        lax = [n for n, ws in rejected.items() if not ws]
        if kind == "constant":
            # A one-element output (a loss, a norm) is its own mean: no constant differs from it.
            single = {
                s["name"]
                for s, e in zip(self.out_specs, self.expected[0][2] if self.expected else [])
                if isinstance(e, torch.Tensor) and e.numel() == 1
            }
            if lax and set(lax) <= single:
                return CheckResult(
                    name,
                    True,
                    f"not applicable to one-element output(s) {', '.join(f'`{n}`' for n in lax)}: a constant is the answer itself",
                    warning=True,
                )
        if lax:
            return CheckResult(
                name,
                False,
                f"{what} passes the correctness rule for output(s) {', '.join(f'`{n}`' for n in lax)} on every visible CPU workload "
                f"({labels}): tighten atol/rtol/min_match or make the inputs produce larger values",
            )
        return CheckResult(name, True, f"{what} fails the correctness rule for every output")

    def check_inputs_matter(self) -> CheckResult:
        """Input k replaced by its value from another draw (everything else kept) must change
        some output, on some visible CPU workload."""
        import torch

        notes, ignored = [], []
        for k, spec in enumerate(self.task.inputs):
            if spec.is_scalar:
                continue
            changed, same_draw, raised = False, True, None
            for i, w in enumerate(self.workloads(self.task.cpu.visible)):
                a = self.inputs(w, self.seed + 1000 + i)
                b = self.inputs(w, self.seed + 2000 + i)
                # On a multi-rank task input k is redrawn on every rank at once.
                pairs = [(ra, rb) for ra, rb in zip(a, b)] if self.world else [(a, b)]
                if all(
                    isinstance(ra[k], torch.Tensor) and torch.equal(ra[k], rb[k])
                    for ra, rb in pairs
                ):
                    continue  # this draw did not change it: nothing to learn here
                same_draw = False
                mixed = [list(ra[:k]) + [rb[k]] + list(ra[k + 1 :]) for ra, rb in pairs]
                try:
                    want = _flat(self.run_reference(_clone_call(a, self.world)))
                    got = _flat(self.run_reference(mixed if self.world else mixed[0]))
                except Exception as exc:  # noqa: BLE001
                    raised = f"{type(exc).__name__}: {_one_line(exc)}"
                    continue
                if any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(want, got)):
                    changed = True
                    break
            if changed:
                continue
            if same_draw:
                notes.append(
                    f"`{spec.name}` is the same in every draw (inputs.py), so it cannot be perturbed"
                )
            elif raised is not None:
                notes.append(
                    f"`{spec.name}` from another draw made the reference raise ({raised}): inputs.py couples it to other inputs"
                )
            else:
                ignored.append(spec.name)
        if ignored:
            return CheckResult(
                "inputs_matter",
                False,
                f"input(s) {', '.join(f'`{n}`' for n in ignored)} change no output when replaced by a fresh draw on any visible CPU workload: "
                "the reference ignores them (remove them, or if that is by design tell the lead: the format has no way yet to declare it)",
            )
        tensors = sum(1 for s in self.task.inputs if not s.is_scalar)
        if notes:
            return CheckResult(
                "inputs_matter", True, "not checked: " + "; ".join(notes), warning=True
            )
        return CheckResult(
            "inputs_matter",
            True,
            f"each of the {tensors} tensor input(s) changes the output when redrawn",
        )


def _as_list(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _flat(outs: list[Any]) -> list[Any]:
    """Every output tensor of a call, every rank's in turn on a multi-rank task."""
    return [t for item in outs for t in (item if isinstance(item, list) else [item])]


def _clone_call(args: list[Any], world: int | None) -> list[Any]:
    return [_clone(a) for a in args] if world else _clone(args)


def _clone(args: list[Any]) -> list[Any]:
    import torch

    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


# --- checks through the harness --------------------------------------------------------------


def check_passes(
    task: Task,
    which: str,
    evaluator: Evaluator,
    options: ValidateOptions,
    results: dict[str, Result],
) -> CheckResult:
    """The baseline (or the starter) as a candidate: the real harness, visible and hidden
    workloads of the evaluator's device (the CPU ones on the CPU device)."""
    result = evaluator.evaluate(
        task, task.file(f"{which}.py"), seed=options.seed, performance=options.performance
    )
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


def check_cpu_budget(task: Task, starter: Result, options: ValidateOptions) -> CheckResult:
    """The starter's CPU evaluation within the budget. Without the performance stage the time
    is the measured stages plus the least the CPU timing budget spends per timed workload."""
    from core.evaluation.evaluator import Timing

    if starter.device.get("id") != "cpu":
        return CheckResult(
            "cpu_budget", True, "not checked: the evaluations ran on a GPU", warning=True
        )
    measured = starter.seconds or 0.0
    if options.performance:
        total, how = measured, f"{measured:.1f} s measured (every stage)"
    else:
        timed = len(task.cpu.visible) + len(task.cpu.hidden.fixed)
        floor = timed * 2 * Timing.for_device("cpu").budget_ms / 1000
        total = measured + floor
        how = f"{measured:.1f} s measured (compile, correctness, hidden) + ≥ {floor:.1f} s of timing ({timed} timed workloads × 2 sides) = {total:.1f} s"
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
    from core.tasks.discovery import task_ids, tasks_root
    from core.tasks.spec import UnknownTaskError

    base = tasks_root(root)
    if not ids:
        return [base / t for t in task_ids(root)]
    folders = []
    for task_id in ids:
        as_path = Path(task_id)
        if (as_path / "task.yaml").is_file():
            folders.append(as_path)
        elif task_id.count("/") == 1 and (base / task_id / "task.yaml").is_file():
            folders.append(base / task_id)
        else:
            known = task_ids(root)
            close = [t for t in known if task_id.split("/")[-1] in t]
            hint = (
                f"did you mean {', '.join(close)}?"
                if close
                else "run `arena tasks list` to see the ids"
            )
            raise UnknownTaskError(f"unknown task `{task_id}`: {hint}")
    return folders
