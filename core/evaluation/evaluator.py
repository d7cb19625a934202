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
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import __version__
from core.devices.device import DeviceInfo, Peaks
from core.devices.ids import gpus_in
from core.devices.sim import predict_collective, sim_baseline, sim_section
from core.evaluation import scan, scoring
from core.evaluation.executors import Executor, HarnessError, LocalExecutor
from core.evaluation.profiles import CI_TARGET, SPECS, Profile, parse_profile, per_regime
from core.model import events
from core.model.result import STAGES, Result, StageResult, WorkloadFigures, unevaluated
from core.tasks import manifest
from core.tasks.spec import Limits, Task, TensorSpec, Workload

OnEvent = Callable[[events.Event], None]
GRAPH_BELOW_US = 50.0  # decode-sized: the launch would rival the kernel, so time graph replays
CHECKED_CALLS_PER_ROUND = 2  # timed calls per round whose outputs are checked (docs/integrity.md)
CPU_CANDIDATE_MEMORY = 2 << 30  # private memory a candidate may add on the CPU device (RLIMIT_DATA)
SIM_CANDIDATE_MEMORY = (
    32 << 30
)  # ... on a sim: device: GPU-sized CPU tensors, mostly never-written zero pages (address space, not RSS)
TASK_FILES = ("reference.py", "baseline.py", "inputs.py", "check.py", "task.yaml")
TASK_SOURCES = ("reference.py", "baseline.py", "inputs.py", "check.py")
# The parent's wall clock against the candidate's own timer (docs/integrity.md):
WALL_SLACK = 1.01, 0.002  # reported > wall × 1.01 + 2 ms in a round: impossible, a forged timer
UNTIMED_FACTOR = 10.0  # untimed time per call above 10× the baseline's ...
UNTIMED_MIN_US = 50.0  # ... and, beyond the baseline's, above the call's median and 50 µs: a note
WARMUP_CALLS = {
    "wall": 0,
    "events": 2,
    "queued": 2,
    "graph": 4,
}  # untimed calls per round, by timing mode
HIGH_SPEEDUP = 10.0  # a workload faster than 10× the baseline: a note


class BadCandidate(ValueError):
    """A candidate file that cannot be evaluated at all (exit code 2)."""


class WorldSizeError(ValueError):
    """A world size the task or the device cannot run (exit code 2)."""


def world_size_for(task: Task, info: DeviceInfo, asked: int | None = None) -> int | None:
    """The ranks a multi-rank task runs on here (None for a single-device task): the one asked
    for, else the CPU device's default, else as many as the device group has GPUs."""
    if task.world_size is None:
        if asked not in (None, 1):
            raise WorldSizeError(
                f"{task.id} runs on one device; --world-size applies to multi-rank tasks (comm/, moe/dispatch, …)"
            )
        return None
    sizes = task.world_size.sizes
    shown = ", ".join(map(str, sizes))
    if info.type in ("cpu", "sim"):  # a sim: device checks correctness on the CPU, over gloo
        world = asked or task.world_size.cpu
    else:
        available = gpus_in(info.id)
        world = asked or available
        if world > available:
            raise WorldSizeError(
                f"{task.id} on {world} ranks needs {world} GPUs; {info.id} is {available}: name a device group such as "
                f"`{info.type}:0-{world - 1}` (docs/devices.md)"
            )
    if world not in sizes:
        raise WorldSizeError(
            f"{task.id} runs on {shown} ranks, not {world}: pass --world-size with one of {shown}"
        )
    return world


@dataclass(frozen=True)
class Timing:
    """How long each side is timed per workload, in rounds that alternate candidate and
    baseline: at most `alternations` rounds of `budget_ms / alternations` a side, and fewer
    once both medians' 95% intervals are within ±`ci_target` after at least `min_rounds`
    (None: every round; `ci_target` 0: no early stop)."""

    alternations: int
    budget_ms: float
    min_calls: int
    max_calls: int
    min_rounds: int | None = None
    ci_target: float = CI_TARGET
    shared_io: bool = True  # False: the old path, inputs drawn in the candidate's process (measurements: docs/integrity.md)

    @classmethod
    def for_device(cls, device_type: str, profile: Profile | str | None = None) -> Timing:
        train = parse_profile(profile) is Profile.TRAIN
        if device_type == "cpu":
            # The CPU device runs Triton in an interpreter: about a second per workload (full).
            if train:
                return cls(alternations=2, budget_ms=200.0, min_calls=1, max_calls=50, min_rounds=1)
            return cls(alternations=3, budget_ms=500.0, min_calls=1, max_calls=50, min_rounds=2)
        if train:
            # At most 64 calls a round: the median's interval is within ±1% after a few dozen
            # calls, and each call costs the harness 0.1-0.5 ms (refill, flush) whatever the
            # kernel's own time (docs/performance.md).
            return cls(alternations=4, budget_ms=40.0, min_calls=3, max_calls=64, min_rounds=2)
        return cls(alternations=5, budget_ms=100.0, min_calls=3, max_calls=1000, min_rounds=2)

    def to_job(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "min_rounds": self.alternations if self.min_rounds is None else self.min_rounds,
        }


def check_candidate(path: Path, task: Task | None = None) -> str:
    """Reject what cannot be a candidate before any process starts; return its sha256. An
    external task's candidate is its editable source (any language, no `run`): it must exist."""
    if not path.is_file():
        raise BadCandidate(
            f"candidate file {path} does not exist: pass the path of a Python file that defines run(*inputs)"
        )
    if task is not None and task.external is not None:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if path.suffix != ".py":
        raise BadCandidate(
            f"candidate {path} is not a .py file: native CUDA/HIP goes in a sibling .cu/.hip loaded by a .py wrapper"
        )
    source = path.read_bytes()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError:
        tree = None  # a syntax error is the candidate's compile failure, reported by the harness
    if tree is not None and not _defines_run(tree):
        raise BadCandidate(
            f"{path} defines no `run`: add `def run(*inputs)` returning the task's outputs"
        )
    return hashlib.sha256(source).hexdigest()


def _defines_run(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "run" for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) == "run" for a in node.names
        ):
            return True
    return False


def _spec_json(spec: TensorSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "dtype": spec.dtype,
        "shape": list(spec.shape) if spec.shape else None,
        "init": spec.init,
        "value": spec.value,
        "inplace_of": spec.inplace_of,
    }


def roofline_for(
    task: Task, w: Workload, info: DeviceInfo, peaks: Peaks | None = None
) -> float | None:
    """Speed of light for workload `w`: the compute/memory roofline, or for a collective the
    link's (its axes hold W). `peaks` defaults to the device's speed-of-light figures."""
    peaks = peaks if peaks is not None else info.sol_peaks
    if peaks is None:
        return None
    if task.collective is not None:
        world = int(w.axes.get("W", 1))
        return scoring.link_roofline_us(
            task.collective_bytes(w), task.collective.bus_factor(world), peaks
        )
    return scoring.roofline_us(task.flops_for(w), task.bytes_for(w), peaks, task.peak)


def bandwidth_figures(
    task: Task, w: Workload, candidate_us: float, baseline_us: float, peaks: Peaks | None
) -> dict[str, Any] | None:
    """A collective's algorithm and bus bandwidth (nccl-tests' definitions), both sides."""
    if task.collective is None:
        return None
    world = int(w.axes.get("W", 1))
    size, factor = task.collective_bytes(w), task.collective.bus_factor(world)
    figures: dict[str, Any] = {
        "world_size": world,
        "size_bytes": size,
        "bus_factor": factor,
        "kind": task.collective.kind,
    }
    for side, us in (("candidate", candidate_us), ("baseline", baseline_us)):
        bw = scoring.bus_bandwidth_gbps(size, factor, us)
        figures[f"{side}_algbw_gbps"], figures[f"{side}_busbw_gbps"] = bw if bw else (None, None)
    figures["link_gbps"] = (
        peaks.link_gbps / 2 if peaks and peaks.link_gbps else None
    )  # per direction
    return figures


def task_file_hashes(task: Task, files: dict[str, bytes] | None = None) -> dict[str, str]:
    """sha256 of the task's files (as staged in `files`, else as they are now): the harness
    executes only these bytes and reports any change made during the evaluation."""
    files = (
        files
        if files is not None
        else {n: task.file(n).read_bytes() for n in TASK_FILES if task.file(n).is_file()}
    )
    return {name: hashlib.sha256(files[name]).hexdigest() for name in TASK_FILES if name in files}


def task_sources(task: Task, files: dict[str, bytes] | None = None) -> dict[str, str]:
    """The code the trusted worker runs (reference, baseline, optional inputs.py), carried in
    the job: the harness needs no task folder, so the sandbox may hide it from the candidate."""
    files = (
        files
        if files is not None
        else {n: task.file(n).read_bytes() for n in TASK_SOURCES if task.file(n).is_file()}
    )
    return {name: files[name].decode() for name in TASK_SOURCES if name in files}


def build_job(
    task: Task,
    candidate: Path,
    info: DeviceInfo,
    torch_device: str,
    secret_seed: int,
    workdir: Path,
    limits: Limits | None = None,
    graphs: bool = True,
    sync_each_call: bool = False,
    timing: Timing | None = None,
    candidate_memory_bytes: int | None = None,
    performance: bool = True,
    visible_only: bool = False,
    world_size: int | None = None,
    profile: Profile | str | None = None,
    files: dict[str, bytes] | None = None,
) -> dict[str, Any]:
    """The resolved job the harness runs: nothing in it needs the engine to interpret.

    `timing` overrides the device's timing budget (tests); `candidate_memory_bytes` the private
    memory a candidate may add on the CPU device (GPU devices get no such limit: the drivers'
    address-space reservations would trip it, and no cgroup bounds them yet: docs/sandbox.md);
    `performance=False` times nothing (`arena tasks validate` asks only for correctness);
    `visible_only=True` leaves every hidden workload out of the job (`arena check`: what an
    agent sees may never name a hidden shape), so generalization is reported skipped.
    `world_size` runs a multi-rank task on that many ranks (default: `world_size_for`); its
    workloads then carry the axis W. `profile` (docs/evaluation.md): `full` (default) or
    `train`: which workloads are timed, the timing budget, and the limits. `files` are the task's
    files as staged before any candidate ran (`Evaluator` passes them; default: read now)."""
    profile = parse_profile(profile)
    spec = SPECS[profile]
    limits = limits or task.limits
    rng = random.Random(secret_seed)
    simulated = (
        info.type == "sim"
    )  # correctness as the CPU device does; performance predicted at GPU sizes
    world = world_size_for(task, info, world_size)
    sets = task.workloads(cpu=info.type in ("cpu", "sim"))
    hidden = [] if visible_only else sets.hidden.resolve(rng)
    visible, fixed_hidden = list(sets.visible), list(sets.hidden.fixed)
    if world is not None:
        visible, fixed_hidden, hidden = (
            [task.at_world(w, world) for w in ws] for ws in (visible, fixed_hidden, hidden)
        )

    def shapes(w: Workload) -> dict[str, list[int]]:
        return {
            s.name: list(s.concrete_shape(w.axes))
            for s in task.inputs + task.outputs
            if s.shape is not None
        }

    def checked(ws: list[Workload] | tuple[Workload, ...]) -> list[dict[str, Any]]:
        return [
            {
                **w.to_json(),
                "shapes": shapes(w),
                "seeds": [rng.getrandbits(62) for _ in range(task.correctness.seeds_for(w.axes))],
            }
            for w in ws
        ]

    timed_sets = task.gpu if simulated else sets
    timed_visible = (
        [task.at_world(w, world) for w in timed_sets.visible]
        if world is not None
        else list(timed_sets.visible)
    )
    timed_fixed = (
        [task.at_world(w, world) for w in timed_sets.hidden.fixed]
        if world is not None
        else list(timed_sets.hidden.fixed)
    )
    timed = timed_visible + ([] if visible_only else timed_fixed)
    if spec.per_regime and world is None:  # `train`: one timed workload per regime

        def small(w: Workload) -> bool | None:
            roof = roofline_for(task, w, info)
            return None if roof is None else roof < GRAPH_BELOW_US

        timed = per_regime(timed, timed_visible, small)
    predicted = []
    if (
        simulated and world is not None
    ):  # a multi-rank task on a sim: device is predicted by the engine, not timed
        predicted = (
            [{**w.to_json(), "hidden": w not in timed_visible} for w in timed]
            if performance and task.collective
            else []
        )
        timed = []
    timed_stage = performance  # the flag; `performance` is the stage's workload list below
    performance = []
    for w in timed:
        roof = roofline_for(task, w, info)
        performance.append(
            {
                **w.to_json(),
                "shapes": shapes(w),
                "seed": rng.getrandbits(40),
                "hidden": w not in timed_visible,
                "graph": graphs
                and world is None
                and info.type == "cuda"
                and roof is not None
                and roof < GRAPH_BELOW_US,
                **(
                    {
                        "formula": {
                            "flops": task.flops_for(w),
                            "bytes": task.bytes_for(w),
                            "dtype": task.peak,
                        }
                    }
                    if simulated
                    else {}
                ),
                **(
                    {"measured_baseline": known}
                    if simulated and (known := sim_baseline(task, w, info, roof))
                    else {}
                ),
            }
        )
    timing = timing or Timing.for_device("cpu" if simulated else info.type, profile)
    default_memory = {"cpu": CPU_CANDIDATE_MEMORY, "sim": SIM_CANDIDATE_MEMORY}.get(info.type)
    memory = candidate_memory_bytes if candidate_memory_bytes is not None else default_memory
    sim = sim_section(info) if simulated else None
    return {
        "version": 1,
        "task_id": task.id,
        "task_dir": str(task.path),
        "task_files": task_file_hashes(task, files),
        "task_sources": task_sources(task, files),
        "candidate": str(candidate.resolve()),
        "device": {
            "id": info.id,
            "type": info.type,
            "torch_device": torch_device,
            **({"aot": sim["aot"]} if sim else {}),
        },
        "inputs": [_spec_json(s) for s in task.inputs],
        "outputs": [_spec_json(s) for s in task.outputs],
        "correctness": {
            "atol": task.correctness.atol,
            "rtol": task.correctness.rtol,
            "min_match": task.correctness.min_match,
        },
        "stages": {
            "correctness": checked(visible),
            "generalization": checked(hidden),
            "performance": performance if timed_stage else [],
        },
        "profile": profile.value,
        "timing": {
            "kind": info.timing_kind,
            "sync_each_call": sync_each_call,
            "checked_calls": CHECKED_CALLS_PER_ROUND,
            **timing.to_job(),
            "round_factor": spec.round_factor,
            "round_floor_s": spec.round_floor_s,
        },
        "limits": {
            "compile_s": min(limits.compile_s, spec.compile_cap_s),
            "correctness_s": limits.correctness_s,
            "performance_s": limits.performance_s,
            "call_s": min(spec.call_s, limits.correctness_s),
            "candidate_memory_bytes": memory,
        },
        "workdir": str(workdir),
        **({"world_size": world} if world is not None else {}),
        **({"sim": sim} if sim else {}),
        **({"predicted_collectives": predicted} if predicted else {}),
    }


def task_dtypes(task: Task) -> list[str]:
    return sorted({s.dtype for s in task.inputs + task.outputs})


def wall_clock_findings(
    label: str, mode: str | None, candidate: dict[str, Any], baseline: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """The parent's wall clock against the candidate's timer: (integrity flags, review notes).

    Proven: in some round the candidate's worker reported more time than the parent saw pass
    around the whole request. Device events and the host clock disagree by parts per million,
    not by a percent: only a forged timer does that.

    Heuristic: the time per timed call that the parent saw and the timer did not (the round's
    wall clock less the reported times and the warm-up calls, counted at the median; the median
    over rounds). The baseline's rounds spend theirs on the same requests, input refills and
    L2 flushes; a candidate whose untimed time per call is above 10× the baseline's, and above
    it by more than the call's own median and 50 µs, is doing work outside the timed region:
    another stream, a thread, a slowed clock. An honest candidate with a slow host path can do
    that too (Python launch overhead, a rebuild between rounds), so it is a review note."""
    flags, notes = [], []
    cand_rounds, base_rounds = candidate.get("rounds") or [], baseline.get("rounds") or []
    for r, rnd in enumerate(cand_rounds):
        if rnd["reported_s"] > rnd["wall_s"] * WALL_SLACK[0] + WALL_SLACK[1]:
            flags.append(
                f"timer_exceeds_wall_clock: {label} round {r + 1}: the candidate's timer reported {rnd['reported_s'] * 1e3:.2f} ms "
                f"of calls in a round the parent clocked at {rnd['wall_s'] * 1e3:.2f} ms"
            )
    warm = WARMUP_CALLS.get(mode or "", 1)
    m_c, m_b = (candidate.get("median_us") or 0.0) / 1e6, (baseline.get("median_us") or 0.0) / 1e6

    def untimed_per_call(rounds: list[dict[str, Any]], median_s: float) -> float | None:
        per_round = [
            (x["wall_s"] - x["reported_s"] - warm * median_s) / x["calls"] * 1e6
            for x in rounds
            if x["calls"]
        ]
        return statistics.median(per_round) if per_round else None

    u_c, u_b = untimed_per_call(cand_rounds, m_c), untimed_per_call(base_rounds, m_b)
    if (
        u_c is not None
        and u_b is not None
        and u_c - u_b > max(m_c * 1e6, UNTIMED_MIN_US)
        and u_c > UNTIMED_FACTOR * max(u_b, 1.0)
    ):
        notes.append(
            f"untimed_work: {label}: {u_c:.1f} µs per call passed outside the candidate's timed region (the baseline's: {u_b:.1f} µs), "
            f"more than the {m_c * 1e6:.1f} µs its timer measured per call: work on another stream or thread, or a slowed clock?"
        )
    return flags, notes


def assemble(
    task: Task,
    job: dict[str, Any],
    info: DeviceInfo,
    sha: str,
    seen: list[events.Event],
    scan_notes: list[str] | None = None,
) -> Result:
    """Fold the harness's events into a Result, scored. `scan_notes` are the static scan's
    review notes for the candidate (computed before it ran)."""
    stages = {name: StageResult(name) for name in STAGES}
    timed: list[WorkloadFigures] = []
    started = next((e for e in seen if isinstance(e, events.EvaluationStarted)), None)
    finished = next((e for e in seen if isinstance(e, events.EvaluationFinished)), None)
    perf = {w["label"]: w for w in job["stages"]["performance"]}
    peaks = info.sol_peaks
    integrity: list[str] = []
    notes: list[str] = list(scan_notes or [])
    impls: list[
        str | None
    ] = []  # what each timed workload's baseline reported (baseline.py's IMPL)
    for e in seen:
        if isinstance(e, events.StageStarted):
            stages[e.stage].status = "running"
        elif isinstance(e, events.StageFinished):
            s = stages[e.stage]
            s.status, s.seconds, s.message, s.log = e.status, e.seconds, e.message, e.log
            if e.stage in ("correctness", "generalization"):  # e.g. inputs on the old path
                s.note = e.note
        elif isinstance(e, events.Finding):
            (integrity if e.proven else notes).append(f"{e.check}: {e.message}")
        elif isinstance(e, events.WorkloadChecked):
            stages[e.stage].workloads.append(
                {
                    "label": e.workload,
                    "axes": e.axes,
                    "passed": e.passed,
                    "message": e.message,
                    "worst": e.worst,
                }
            )
        elif isinstance(e, events.WorkloadTimed):
            w = perf[e.workload]
            workload = Workload(e.axes)
            cand, base = e.candidate.get("median_us", 0.0), e.baseline.get("median_us", 0.0)
            ranked = info.timing_kind in (
                "measured",
                "predicted",
            )  # cpu times get no speed-of-light fraction
            roof = roofline_for(task, workload, info) if peaks and ranked else None
            launch_floor = (
                scoring.launch_floor_us(peaks, _graph_timed(e.mode, roof))
                if roof is not None
                else None
            )
            sol_us = scoring.reachable_us(roof, launch_floor)
            impls.append(e.baseline.get("impl"))
            spec_roof = roofline_for(task, workload, info, info.spec) if info.spec else None
            floor = None if spec_roof is None else scoring.IMPOSSIBILITY_MARGIN * spec_roof
            if (
                info.timing_kind in ("measured", "predicted")
                and floor is not None
                and (0 < cand or info.timing_kind == "predicted")
                and cand < floor
            ):
                # predicted too: a count that missed work (a kernel that did less when counted) predicts the impossible
                verb = "was predicted at" if info.timing_kind == "predicted" else "took"
                integrity.append(
                    f"faster_than_speed_of_light: {e.workload} {verb} {cand:.2f} µs, below the floor of {floor:.2f} µs (90% of the spec roofline)"
                )
            flags, wall_notes = wall_clock_findings(e.workload, e.mode, e.candidate, e.baseline)
            integrity += flags
            # The heuristics read timings; CPU timings are informational and too noisy for them
            # (bf16 matmul on a CPU varies tenfold between identical calls).
            if info.timing_kind != "cpu":
                notes += wall_notes
            if info.timing_kind != "cpu" and scoring.speedup(base, cand) > HIGH_SPEEDUP:
                notes.append(
                    f"high_speedup: {e.workload} ran {scoring.speedup(base, cand):.1f}× faster than the baseline: check it by hand"
                )
            timed.append(
                WorkloadFigures(
                    label=e.workload,
                    axes=e.axes,
                    hidden=bool(w.get("hidden")),
                    mode=e.mode,
                    candidate=e.candidate,
                    baseline=e.baseline,
                    speedup=scoring.speedup(base, cand),
                    roofline_us=roof,
                    sol_fraction=scoring.sol_fraction(sol_us, cand),
                    model=w.get("model"),
                    notes=e.notes,
                    band=_speedup_band(e) if e.mode == "predicted" else None,
                    bandwidth=bandwidth_figures(
                        task, workload, cand, base, peaks if ranked else None
                    ),
                    launch_floor_us=launch_floor,
                    sol_us=sol_us,
                    roofline_fraction=scoring.sol_fraction(roof, cand),
                )
            )
    for s in stages.values():
        if s.status == "running":  # the harness stopped mid-stage
            s.status = "error"
    if job.get("predicted_collectives") and stages["performance"].status == "passed":
        timed += predicted_collectives(task, job, info)
        stages["performance"].message = (
            "predicted by the alpha-beta model (docs/simulation.md): the fastest algorithm's time at each size and world size, "
            "the same for every correct implementation"
        )
    elif not job["stages"]["performance"] and stages["performance"].status == "passed":
        stages["performance"].status = "skipped"  # asked for no timing: nothing was timed
    if not job["stages"]["generalization"] and stages["generalization"].status == "passed":
        stages[
            "generalization"
        ].status = "skipped"  # visible only: no hidden workload was in the job
    failed_stage = next(
        (s.name for s in stages.values() if s.status not in ("passed", "skipped")), None
    )
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
    roofs = [w.roofline_fraction for w in timed]
    roof_fraction = (
        scoring.geomean(roofs) if correct and roofs and all(x is not None for x in roofs) else None
    )  # type: ignore[misc]
    impl, impl_kind = baseline_ran(task, impls)
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
        review_notes=notes,
        versions={"arena": __version__, **(started.versions if started else info.versions)},
        seconds=finished.seconds if finished else None,
        world_size=job.get("world_size"),
        baseline_impl=impl,
        baseline_kind=impl_kind,
        roofline_fraction=roof_fraction,
        profile=job.get("profile"),
    )


def _graph_timed(mode: str | None, roofline: float | None) -> bool:
    """Whether a workload's time is a graph replay's (its launch floor is then the graph
    floor): measured in `graph` mode, or predicted for a size a GPU would time in graphs."""
    if mode == "predicted":
        return roofline is not None and roofline < GRAPH_BELOW_US
    return mode == "graph"


def baseline_ran(task: Task, reported: list[str | None]) -> tuple[str | None, str | None]:
    """(baseline_impl, its kind) of a result: what the baseline's process reported for its
    timed workloads (a task with one declared implementation needs no report), several
    joined by "+" in task.yaml's order of preference."""
    names = {task.baseline_impl(r).impl if task.baseline_impl(r) else r for r in reported}
    names.discard(None)
    if not names:
        return None, None
    order = [b.impl for b in task.baselines]
    ran = sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))  # type: ignore[arg-type]
    kinds = {b.kind for b in task.baselines if b.impl in ran}
    return "+".join(ran), (kinds.pop() if len(kinds) == 1 else None)  # type: ignore[arg-type]


def _speedup_band(e: events.WorkloadTimed) -> float | None:
    """The ± band of a predicted speedup: the two sides' bands compounded (their errors are
    taken as independent, so it is wider than either)."""
    bands = [side.get("band") for side in (e.candidate, e.baseline)]
    if not all(isinstance(b, (int, float)) for b in bands):
        return None
    return (1 + bands[0]) * (1 + bands[1]) - 1  # type: ignore[operator]


def predicted_collectives(
    task: Task, job: dict[str, Any], info: DeviceInfo
) -> list[WorkloadFigures]:
    """A collective's figures on a sim: device: the alpha-beta model's time for the candidate
    and the baseline alike (it knows the message, the world and the link, not the code), so
    the speedup is 1 and the figures say what the target's link allows."""
    assert task.collective is not None
    peaks = info.sol_peaks
    figures = []
    for w in job["predicted_collectives"]:
        workload = Workload(w["axes"])
        world = int(workload.axes["W"])
        p = predict_collective(task.collective.kind, task.collective_bytes(workload), world, peaks)
        side = {
            "median_us": p.time_us,
            "band": p.band,
            "low_us": p.low_us,
            "high_us": p.high_us,
            "algorithm": p.algorithm,
        }
        roof = roofline_for(task, workload, info) if peaks else None
        figures.append(
            WorkloadFigures(
                label=w["label"],
                axes=w["axes"],
                hidden=bool(w.get("hidden")),
                mode="predicted",
                candidate=side,
                baseline=dict(side),
                speedup=1.0,
                roofline_us=roof,
                sol_fraction=scoring.sol_fraction(roof, p.time_us),
                model=w.get("model"),
                notes=[
                    f"alpha-beta model, {p.algorithm} ({p.calibration}): the same for every correct implementation"
                ],
                band=p.band,
                bandwidth=bandwidth_figures(task, workload, p.time_us, p.time_us, peaks),
            )
        )
    return figures


def infrastructure_result(
    task: Task, info: DeviceInfo, sha: str, message: str, profile: str | None = None
) -> Result:
    device = {"id": info.id, "model": info.model, "vendor": info.vendor, "arch": info.arch}
    return unevaluated(
        task.id,
        device,
        info.timing_kind,
        sha,
        message,
        status="infrastructure_error",
        profile=profile,
        versions=info.versions,
    )


def job_deadline_s(limits: Limits) -> float:
    return limits.compile_s + 2 * limits.correctness_s + limits.performance_s + 60.0


class Evaluator:
    """Evaluates candidates on one device through one executor (a warm harness on this
    machine by default; a remote host's through remotes/)."""

    def __init__(
        self,
        device_id: str | None = None,
        workdir: Path | None = None,
        keep_workdir: bool = False,
        graphs: bool = True,
        sync_each_call: bool = False,
        executor: Executor | None = None,
        timing: Timing | None = None,
    ):
        """`graphs=False` times decode-sized workloads eagerly too; `sync_each_call=True` makes
        the host wait for the device after every timed call (both for timer studies: the
        default queues a round's calls back to back, see docs/fidelity.md); `timing` replaces
        the device's timing budget (the cheat suite's short one, say)."""
        self.graphs, self.sync_each_call, self.timing = graphs, sync_each_call, timing
        # What judges candidates is read once, checked against the manifest, before any of them
        # runs (a mismatch raises ManifestMismatch: exit 2); later evaluations use these bytes.
        self.engine_data = manifest.stage_engine_data()
        self.staged_tasks: dict[Path, manifest.Staged] = {}
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

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.executor.close()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def evaluate(
        self,
        task: Task,
        candidate: Path | str,
        seed: int | None = None,
        on_event: OnEvent | None = None,
        limits: Limits | None = None,
        performance: bool = True,
        world_size: int | None = None,
        profile: Profile | str | None = None,
    ) -> Result:
        """Evaluate one candidate; `limits` overrides the task's per-stage time limits;
        `performance=False` stops after the hidden workloads' correctness (the performance stage
        is reported skipped); `profile`: `full` (default) or `train` (core/evaluation/profiles.py). An
        infrastructure fault is retried once, then reported as one (exit code 3)."""
        for attempt in range(2):
            try:
                return asyncio.run(
                    self.aevaluate(
                        task,
                        candidate,
                        seed,
                        on_event,
                        limits,
                        performance,
                        world_size=world_size,
                        profile=profile,
                    )
                )
            except HarnessError as exc:
                if attempt == 1:
                    result = infrastructure_result(
                        task,
                        self.info,
                        check_candidate(Path(candidate)),
                        str(exc),
                        parse_profile(profile).value,
                    )
                    result.sandbox = self.sandbox_record()
                    return result
        raise AssertionError("unreachable")

    def _job_dir(self) -> Path:
        self.count += 1
        job_dir = self.root / f"eval-{self.count:04d}-{secrets.token_hex(3)}"
        job_dir.mkdir(parents=True, exist_ok=True)
        return job_dir

    async def aevaluate(
        self,
        task: Task,
        candidate: Path | str,
        seed: int | None = None,
        on_event: OnEvent | None = None,
        limits: Limits | None = None,
        performance: bool = True,
        visible_only: bool = False,
        world_size: int | None = None,
        profile: Profile | str | None = None,
    ) -> Result:
        """One evaluation; raises HarnessError on an infrastructure fault (for the scheduler
        to retry elsewhere); WorldSizeError before anything runs for a world size the task or
        the device cannot run. `visible_only`, `world_size`, `profile`: see `build_job`."""
        candidate = Path(candidate)
        if (
            task.external is not None
        ):  # its own commands and rules, not the harness (core/evaluation/external.py)
            return await asyncio.to_thread(self._evaluate_external, task, candidate, profile)
        limits = limits or task.limits
        sha = check_candidate(candidate)
        scan_notes = scan.scan_candidate(
            candidate, task_dtypes(task)
        )  # before it runs: it may rewrite itself
        job_dir = self._job_dir()
        staged = self.stage_task(task)
        job = build_job(
            task,
            candidate,
            self.info,
            self.executor.torch_device(),
            seed if seed is not None else secrets.randbits(63),
            job_dir,
            limits,
            self.graphs,
            self.sync_each_call,
            self.timing,
            performance=performance,
            visible_only=visible_only,
            world_size=world_size,
            profile=profile,
            files=staged.named(task.path.resolve()),
        )
        watched = (("task_files_modified", staged), ("engine_data_modified", self.engine_data))
        before = [(what, files.on_disk()) for what, files in watched]
        seen = await self.executor.run(job, job_dir, job_deadline_s(limits), on_event)
        result = assemble(task, job, self.info, sha, seen, scan_notes)
        result.sandbox = self.sandbox_record()
        for what, files_before in before:
            self._flag_changes(
                result, what, [p for p, data in files_before.items() if manifest.read(p) != data]
            )
        return result

    def _evaluate_external(
        self, task: Task, candidate: Path, profile: Profile | str | None
    ) -> Result:
        from core.evaluation.external import evaluate_external

        device = getattr(self.executor, "device", None)
        if device is None or not hasattr(device, "harness_env"):
            sha = hashlib.sha256(candidate.read_bytes()).hexdigest()
            return infrastructure_result(
                task,
                self.info,
                sha,
                "cannot evaluate on this device: external tasks run on this machine's devices only",
                parse_profile(profile).value,
            )
        return evaluate_external(
            task,
            candidate,
            self.info,
            device.harness_env(),
            self._job_dir(),
            parse_profile(profile).value,
        )

    def stage_task(self, task: Task) -> manifest.Staged:
        """The task's files as first read by this evaluator (a bundled task checked against the
        manifest): every evaluation is judged with these bytes, whatever happens on disk later."""
        key = task.path.resolve()
        if key not in self.staged_tasks:
            self.staged_tasks[key] = manifest.stage_task(key)
        return self.staged_tasks[key]

    def sandbox_record(self) -> dict[str, Any] | None:
        """The executor's sandbox, as `Result.sandbox` records it (None: an executor that does not say)."""
        info = getattr(self.executor, "sandbox_info", None)
        return (
            info.to_json()
            if hasattr(info, "to_json")
            else (dict(info) if isinstance(info, dict) else None)
        )

    @staticmethod
    def _flag_changes(result: Result, what: str, changed: list[Path]) -> None:
        """A task or engine data file that changed on disk during the evaluation: the candidate
        did it (nothing else runs meanwhile), an integrity violation. The next evaluations
        still use the staged bytes; the next process refuses a changed bundled file."""
        if not changed:
            return
        names = ", ".join(manifest.rel(p) if manifest.is_bundled(p) else str(p) for p in changed)
        hint = (
            f"; {manifest.restore_hint(changed[0])}"
            if manifest.is_bundled(changed[0])
            else "; restore them before the next run"
        )
        if not any(f.startswith(what) for f in result.integrity_flags):
            result.integrity_flags.append(
                f"{what}: {names} changed on disk during the evaluation (judged with the copy staged before it){hint}"
            )
        if result.status == "passed":
            compiled = (
                result.stage("compile").status == "passed"
            )  # scored as assemble scores a violation
            result.status, result.failed_stage, result.speedup, result.sol_fraction = (
                "failed",
                "performance",
                0.0,
                None,
            )
            result.points = scoring.points(compiled, False, 0.0)

    async def aevaluate_batch(
        self,
        task: Task,
        candidates: Sequence[Path | str],
        seed: int | None = None,
        on_event: OnEvent | None = None,
        limits: Limits | None = None,
        performance: bool = True,
        visible_only: bool = False,
        profile: Profile | str | None = None,
        on_result: Callable[[int, Result], None] | None = None,
    ) -> list[Result]:
        """Many candidates of one task as one batch (core/evaluation/batch.py): the same workloads and
        seeds for all, the reference and baseline shared, each candidate's verdict its own.
        Results in the candidates' order (`on_result(k, result)` as each is known); raises
        BadCandidate for a file that is no candidate (check each with `check_candidate` first
        to score it instead)."""
        from core.evaluation.batch import evaluate_batch

        return await evaluate_batch(
            self,
            task,
            [Path(c) for c in candidates],
            seed,
            on_event,
            limits,
            performance,
            visible_only,
            profile,
            on_result,
        )


def evaluate(
    task: Task,
    candidate: Path | str,
    device: str = "cpu",
    seed: int | None = None,
    on_event: OnEvent | None = None,
) -> Result:
    """Evaluate one candidate on one device: the whole gated pipeline, scored."""
    with Evaluator(device) as evaluator:
        return evaluator.evaluate(task, candidate, seed=seed, on_event=on_event)
