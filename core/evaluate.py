"""The gated pipeline: compile → correctness → generalization (hidden) → performance.

The engine resolves a job (concrete workloads, hidden ones drawn with a secret seed, seeds,
limits, timing settings), hands it to the harness in its own process on the device, reads the
harness's events from a private descriptor, and turns them into a `Result`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import secrets
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import __version__, events, scoring
from .devices import DeviceInfo, LocalDevice, parse_device, probe
from .result import STAGES, Result, StageResult, WorkloadFigures
from .tasks import Limits, Task, TensorSpec, Workload

OnEvent = Callable[[events.Event], None]
GRAPH_BELOW_US = 50.0  # decode-sized: the launch would rival the kernel, so time graph replays
HARNESS_START_S = 120.0


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
    task: Task, candidate: Path, info: DeviceInfo, device: LocalDevice, secret_seed: int, workdir: Path,
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
        "device": {"id": info.id, "type": info.type, "torch_device": device.torch_device()},
        "inputs": [_spec_json(s) for s in task.inputs],
        "outputs": [_spec_json(s) for s in task.outputs],
        "correctness": {"atol": task.correctness.atol, "rtol": task.correctness.rtol, "min_match": task.correctness.min_match},
        "stages": {"correctness": checked(sets.visible), "generalization": checked(hidden), "performance": performance},
        "timing": {"kind": info.timing_kind, "sync_each_call": sync_each_call, **timing.__dict__},
        "limits": {"compile_s": limits.compile_s, "correctness_s": limits.correctness_s, "performance_s": limits.performance_s},
        "workdir": str(workdir),
    }


class HarnessError(RuntimeError):
    """The harness itself failed (not the candidate): an infrastructure fault."""


class Harness:
    """A warm harness parent on one device: started once, it evaluates job after job, forking
    fresh workers for each. Use as a context manager."""

    def __init__(self, device: LocalDevice, log_dir: Path):
        self.device = device
        self.log_path = log_dir / "harness.log"
        read_fd, write_fd = os.pipe()
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "core.harness", "serve", "--events-fd", str(write_fd)],
            env={**os.environ, **device.harness_env()}, stdin=subprocess.PIPE, stdout=self._log, stderr=self._log,
            pass_fds=(write_fd,), start_new_session=True, cwd=str(log_dir),
        )
        os.close(write_fd)
        self._events = os.fdopen(read_fd, "rb", buffering=0)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._events, selectors.EVENT_READ)
        self._buffer = b""
        first = self._next(time.monotonic() + HARNESS_START_S)
        if not isinstance(first, events.HarnessReady):
            raise HarnessError(f"the harness did not start: {self._tail()}")

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def _next(self, deadline: float) -> events.Event:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(timeout=left):
                raise HarnessError("the harness sent no event before its deadline")
            chunk = os.read(self._events.fileno(), 1 << 16)
            if not chunk:
                raise HarnessError(f"the harness exited: {self._tail()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return events.parse(line)

    def run(self, job_path: Path, deadline_s: float, on_event: OnEvent | None = None) -> list[events.Event]:
        """Run one job; every event is passed to `on_event` as it arrives and returned."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{job_path}\n".encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise HarnessError(f"the harness exited: {self._tail()}") from None
        deadline = time.monotonic() + deadline_s
        seen: list[events.Event] = []
        while True:
            event = self._next(deadline)
            seen.append(event)
            if on_event is not None:
                on_event(event)
            if isinstance(event, events.EvaluationFinished):
                return seen

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._selector.close()
        self._events.close()
        self._log.close()


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
    """Evaluates candidates on one device through one warm harness."""

    def __init__(
        self, device_id: str, workdir: Path | None = None, keep_workdir: bool = False, graphs: bool = True, sync_each_call: bool = False
    ):
        """`graphs=False` times decode-sized workloads eagerly too; `sync_each_call=True` makes
        the host wait for the device after every timed call (both for timer studies: the
        default queues a round's calls back to back, see docs/fidelity.md)."""
        self.device = parse_device(device_id)
        self.graphs, self.sync_each_call = graphs, sync_each_call
        self.info = probe(device_id)
        self.keep = keep_workdir or workdir is not None
        self.root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="arena-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.harness: Harness | None = None
        self.count = 0

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.harness is not None:
            self.harness.close()
            self.harness = None
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def evaluate(
        self, task: Task, candidate: Path | str, seed: int | None = None, on_event: OnEvent | None = None, limits: Limits | None = None
    ) -> Result:
        """Evaluate one candidate; `limits` overrides the task's per-stage time limits."""
        candidate = Path(candidate)
        limits = limits or task.limits
        sha = check_candidate(candidate)
        self.count += 1
        workdir = self.root / f"eval-{self.count:04d}"
        workdir.mkdir(parents=True, exist_ok=True)
        job = build_job(task, candidate, self.info, self.device, seed if seed is not None else secrets.randbits(63), workdir, limits, self.graphs, self.sync_each_call)
        job_path = workdir / "job.json"
        job_path.write_text(json.dumps(job))
        for attempt in range(2):  # a harness that died is restarted once; the candidate is not to blame
            try:
                if self.harness is None:
                    self.harness = Harness(self.device, self.root)
                seen = self.harness.run(job_path, job_deadline_s(limits), on_event)
                return assemble(task, job, self.info, sha, seen)
            except HarnessError as exc:
                if self.harness is not None:
                    self.harness.close()
                    self.harness = None
                if attempt == 1:
                    return infrastructure_result(task, self.info, sha, str(exc))
        raise AssertionError("unreachable")


def evaluate(task: Task, candidate: Path | str, device: str = "cpu", seed: int | None = None, on_event: OnEvent | None = None) -> Result:
    """Evaluate one candidate on one device: the whole gated pipeline, scored."""
    with Evaluator(device) as evaluator:
        return evaluator.evaluate(task, candidate, seed=seed, on_event=on_event)
