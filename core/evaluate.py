"""The gated pipeline: compile → correctness → generalization (hidden) → performance.

The engine resolves a job (concrete workloads, hidden ones drawn with a secret seed, seeds,
limits, timing settings), hands it to the harness in its own process on the device, reads the
harness's events from a private descriptor, and turns them into a `Result`.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import random
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import __version__, events, scoring
from .devices import DeviceInfo
from .executors import Executor, HarnessError, LocalExecutor
from .result import STAGES, Result, StageResult, WorkloadFigures
from .tasks import Limits, Task, TensorSpec, Workload

OnEvent = Callable[[events.Event], None]
GRAPH_BELOW_US = 50.0  # decode-sized: the launch would rival the kernel, so time graph replays


class BadCandidate(ValueError):
    """A candidate file that cannot be evaluated at all (exit code 2)."""


@dataclass(frozen=True)
class Timing:
    """How long each side is timed per workload, in rounds that alternate candidate and baseline."""

    alternations: int
    budget_ms: float
    min_calls: int
    max_calls: int

    @classmethod
    def for_device(cls, device_type: str) -> "Timing":
        if device_type == "cpu":
            # The CPU device runs Triton in an interpreter: about a second per workload.
            return cls(alternations=3, budget_ms=500.0, min_calls=1, max_calls=50)
        return cls(alternations=5, budget_ms=100.0, min_calls=3, max_calls=1000)


def check_candidate(path: Path) -> str:
    """Reject what cannot be a candidate before any process starts; return its sha256."""
    if not path.is_file():
        raise BadCandidate(f"candidate file {path} does not exist: pass the path of a Python file that defines run(*inputs)")
    if path.suffix != ".py":
        raise BadCandidate(f"candidate {path} is not a .py file: native CUDA/HIP goes in a sibling .cu/.hip loaded by a .py wrapper")
    source = path.read_bytes()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError:
        tree = None  # a syntax error is the candidate's compile failure, reported by the harness
    if tree is not None and not _defines_run(tree):
        raise BadCandidate(f"{path} defines no `run`: add `def run(*inputs)` returning the task's outputs")
    return hashlib.sha256(source).hexdigest()


def _defines_run(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "run" for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == "run" for a in node.names):
            return True
    return False


def _spec_json(spec: TensorSpec) -> dict[str, Any]:
    return {"name": spec.name, "dtype": spec.dtype, "shape": list(spec.shape) if spec.shape else None, "init": spec.init, "value": spec.value, "inplace_of": spec.inplace_of}


def roofline_for(task: Task, w: Workload, info: DeviceInfo) -> float | None:
    peaks = info.sol_peaks
    return scoring.roofline_us(task.flops_for(w), task.bytes_for(w), peaks, task.peak) if peaks else None


def build_job(
    task: Task, candidate: Path, info: DeviceInfo, torch_device: str, secret_seed: int, workdir: Path,
    limits: Limits | None = None, graphs: bool = True, sync_each_call: bool = False,
) -> dict[str, Any]:
    """The resolved job the harness runs: nothing in it needs the engine to interpret."""
    limits = limits or task.limits
    rng = random.Random(secret_seed)
    sets = task.workloads(cpu=info.type == "cpu")
    hidden = sets.hidden.resolve(rng)

    def shapes(w: Workload) -> dict[str, list[int]]:
        return {s.name: list(s.concrete_shape(w.axes)) for s in task.inputs + task.outputs if s.shape is not None}

    def checked(ws: list[Workload] | tuple[Workload, ...]) -> list[dict[str, Any]]:
        return [{**w.to_json(), "shapes": shapes(w), "seeds": [rng.getrandbits(62) for _ in range(task.correctness.seeds)]} for w in ws]

    timed = list(sets.visible) + list(sets.hidden.fixed)
    performance = []
    for w in timed:
        roof = roofline_for(task, w, info)
        performance.append({
            **w.to_json(), "shapes": shapes(w), "seed": rng.getrandbits(40), "hidden": w not in sets.visible,
            "graph": graphs and info.type == "cuda" and roof is not None and roof < GRAPH_BELOW_US,
        })
    timing = Timing.for_device(info.type)
    return {
        "version": 1,
        "task_id": task.id,
        "task_dir": str(task.path),
        "candidate": str(candidate.resolve()),
        "device": {"id": info.id, "type": info.type, "torch_device": torch_device},
        "inputs": [_spec_json(s) for s in task.inputs],
        "outputs": [_spec_json(s) for s in task.outputs],
        "correctness": {"atol": task.correctness.atol, "rtol": task.correctness.rtol, "min_match": task.correctness.min_match},
        "stages": {"correctness": checked(sets.visible), "generalization": checked(hidden), "performance": performance},
        "timing": {"kind": info.timing_kind, "sync_each_call": sync_each_call, **timing.__dict__},
        "limits": {"compile_s": limits.compile_s, "correctness_s": limits.correctness_s, "performance_s": limits.performance_s},
        "workdir": str(workdir),
    }


def assemble(task: Task, job: dict[str, Any], info: DeviceInfo, sha: str, seen: list[events.Event]) -> Result:
    """Fold the harness's events into a Result, scored."""
    stages = {name: StageResult(name) for name in STAGES}
    timed: list[WorkloadFigures] = []
    started = next((e for e in seen if isinstance(e, events.EvaluationStarted)), None)
    finished = next((e for e in seen if isinstance(e, events.EvaluationFinished)), None)
    perf = {w["label"]: w for w in job["stages"]["performance"]}
    peaks = info.sol_peaks
    integrity: list[str] = []
    for e in seen:
        if isinstance(e, events.StageStarted):
            stages[e.stage].status = "running"
        elif isinstance(e, events.StageFinished):
            s = stages[e.stage]
            s.status, s.seconds, s.message, s.log = e.status, e.seconds, e.message, e.log
        elif isinstance(e, events.WorkloadChecked):
            stages[e.stage].workloads.append({"label": e.workload, "axes": e.axes, "passed": e.passed, "message": e.message, "worst": e.worst})
        elif isinstance(e, events.WorkloadTimed):
            w = perf[e.workload]
            workload = Workload(e.axes)
            cand, base = e.candidate.get("median_us", 0.0), e.baseline.get("median_us", 0.0)
            roof = scoring.roofline_us(task.flops_for(workload), task.bytes_for(workload), peaks, task.peak) if peaks and info.timing_kind == "measured" else None
            floor = scoring.impossibility_floor_us(task.flops_for(workload), task.bytes_for(workload), info.spec, task.peak)
            if info.timing_kind == "measured" and floor is not None and 0 < cand < floor:
                integrity.append(f"faster_than_speed_of_light: {e.workload} took {cand:.2f} µs, below the floor of {floor:.2f} µs (90% of the spec roofline)")
            timed.append(WorkloadFigures(
                label=e.workload, axes=e.axes, hidden=bool(w.get("hidden")), mode=e.mode, candidate=e.candidate, baseline=e.baseline,
                speedup=scoring.speedup(base, cand), roofline_us=roof, sol_fraction=scoring.sol_fraction(roof, cand),
                model=w.get("model"), notes=e.notes,
            ))
    for s in stages.values():
        if s.status == "running":  # the harness stopped mid-stage
            s.status = "error"
    failed_stage = next((s.name for s in stages.values() if s.status not in ("passed", "skipped")), None)
    infra = finished is None or finished.fault == "infrastructure"
    if integrity:
        status = "failed"
        failed_stage = failed_stage or "performance"
    elif failed_stage is None and finished is not None and finished.status == "passed":
        status = "passed"
    else:
        status = "infrastructure_error" if infra else "failed"
    correct = status == "passed"
    task_speedup = scoring.geomean(w.speedup for w in timed) if correct else 0.0
    sols = [w.sol_fraction for w in timed]
    sol = scoring.geomean(sols) if correct and sols and all(x is not None for x in sols) else None  # type: ignore[misc]
    compiled = stages["compile"].status == "passed"
    return Result(
        task_id=task.id,
        candidate_sha256=sha,
        device={"id": info.id, "model": info.model, "vendor": info.vendor, "arch": info.arch},
        timing_kind=info.timing_kind,
        status=status,
        failed_stage=failed_stage,
        stages=list(stages.values()),
        workloads=timed,
        speedup=task_speedup,
        sol_fraction=sol,
        sol_source=peaks.source if peaks and sol is not None else None,
        points=scoring.points(compiled, correct, task_speedup),
        integrity_flags=integrity,
        versions={"arena": __version__, **(started.versions if started else info.versions)},
        seconds=finished.seconds if finished else None,
    )


def infrastructure_result(task: Task, info: DeviceInfo, sha: str, message: str) -> Result:
    stage = StageResult("compile", status="error", message=message)
    return Result(
        task_id=task.id, candidate_sha256=sha, device={"id": info.id, "model": info.model, "vendor": info.vendor, "arch": info.arch},
        timing_kind=info.timing_kind, status="infrastructure_error", failed_stage="compile",
        stages=[stage] + [StageResult(n) for n in STAGES[1:]], workloads=[], speedup=0.0, sol_fraction=None, sol_source=None,
        points=0.0, versions={"arena": __version__, **info.versions},
    )


def job_deadline_s(limits: Limits) -> float:
    return limits.compile_s + 2 * limits.correctness_s + limits.performance_s + 60.0


class Evaluator:
    """Evaluates candidates on one device through one executor (a warm harness on this
    machine by default; a remote host's through remotes/)."""

    def __init__(
        self, device_id: str | None = None, workdir: Path | None = None, keep_workdir: bool = False, graphs: bool = True,
        sync_each_call: bool = False, executor: Executor | None = None,
    ):
        """`graphs=False` times decode-sized workloads eagerly too; `sync_each_call=True` makes
        the host wait for the device after every timed call (both for timer studies: the
        default queues a round's calls back to back, see docs/fidelity.md)."""
        self.graphs, self.sync_each_call = graphs, sync_each_call
        self.keep = keep_workdir or workdir is not None
        self.root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="arena-"))
        self.root.mkdir(parents=True, exist_ok=True)
        if executor is None:
            if device_id is None:
                raise ValueError("give a device id or an executor")
            executor = LocalExecutor(device_id, self.root)
        self.executor = executor
        self.info = executor.info
        self.count = 0

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.executor.close()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def evaluate(
        self, task: Task, candidate: Path | str, seed: int | None = None, on_event: OnEvent | None = None, limits: Limits | None = None
    ) -> Result:
        """Evaluate one candidate; `limits` overrides the task's per-stage time limits. An
        infrastructure fault is retried once, then reported as one (exit code 3)."""
        for attempt in range(2):
            try:
                return asyncio.run(self.aevaluate(task, candidate, seed, on_event, limits))
            except HarnessError as exc:
                if attempt == 1:
                    return infrastructure_result(task, self.info, check_candidate(Path(candidate)), str(exc))
        raise AssertionError("unreachable")

    async def aevaluate(
        self, task: Task, candidate: Path | str, seed: int | None = None, on_event: OnEvent | None = None, limits: Limits | None = None
    ) -> Result:
        """One evaluation; raises HarnessError on an infrastructure fault (for the scheduler
        to retry elsewhere)."""
        candidate = Path(candidate)
        limits = limits or task.limits
        sha = check_candidate(candidate)
        self.count += 1
        job_dir = self.root / f"eval-{self.count:04d}-{secrets.token_hex(3)}"
        job_dir.mkdir(parents=True, exist_ok=True)
        job = build_job(
            task, candidate, self.info, self.executor.torch_device(), seed if seed is not None else secrets.randbits(63),
            job_dir, limits, self.graphs, self.sync_each_call,
        )
        seen = await self.executor.run(job, job_dir, job_deadline_s(limits), on_event)
        return assemble(task, job, self.info, sha, seen)


def evaluate(task: Task, candidate: Path | str, device: str = "cpu", seed: int | None = None, on_event: OnEvent | None = None) -> Result:
    """Evaluate one candidate on one device: the whole gated pipeline, scored."""
    with Evaluator(device) as evaluator:
        return evaluator.evaluate(task, candidate, seed=seed, on_event=on_event)
