"""What `arena tasks validate` reports: the checks by name (`CHECK_NAMES`, in the order they run),
one check's `CheckResult`, a task's `TaskReport` and the `ValidateOptions` of a run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

CPU_BUDGET_S = (
    60.0  # CPU seconds of the whole CPU evaluation of a task's starter (the brief's figure)
)
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
