"""Building the job the harness runs: the timing settings (`Timing`), the world size of a
multi-rank task, the rooflines and bandwidth figures, the hashes and sources of the task files,
and `build_job`, which resolves workloads, seeds, limits and settings into one `Job`."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.devices.device import DeviceInfo, Peaks
from core.devices.ids import gpus_in
from core.devices.sim import sim_anchor, sim_baseline, sim_section
from core.evaluation import scoring
from core.evaluation.profiles import CI_TARGET, SPECS, Profile, parse_profile, per_regime
from core.evaluation.sim_scaled import scaled_json
from core.model import events
from core.model.task import Limits, Task, TensorSpec
from core.model.workload import Workload

OnEvent = Callable[[events.Event], None]


GRAPH_BELOW_US = 50.0  # decode-sized: the launch would rival the kernel, so time graph replays
TIMING_CPU_ENV = "ARENA_TIMING_CPU"  # the CPU a GPU's timed rounds run on: a number, auto, off
# Where a graph round's capture lies: `fixed` (the default, every figure in docs/), `per_round`,
# moved in memory each round (core/harness/timing.py Round.placement_per_round): measured on an
# H100, it left the offset between an evaluation's two processes as it was (docs/fidelity.md,
# "Where the offset comes from"); kept to repeat that measurement on other GPUs;
# `new_stream`, each round on a stream of its own (Round.stream_per_round); or `new_code`, each
# round's Triton kernels loaded afresh (Round.code_per_round)
TIMING_PLACEMENT_ENV = "ARENA_TIMING_PLACEMENT"
TIMING_PLACEMENTS = ("fixed", "per_round", "new_stream", "new_code")
# Where a graph round's timing events lie: `outside` (the default: around the replay, the
# graph's launch included) or `inside` (the graph's first and last nodes: core/harness/timing.py
# Round.events_inside), a setting for measuring what the launch adds to the offset between an
# evaluation's two processes (docs/fidelity.md)
TIMING_EVENTS_ENV = "ARENA_TIMING_EVENTS"
TIMING_EVENTS = ("outside", "inside")
# `off`: an autotuner's configurations compiled one by one in its trials (a diagnosis: the
# default compiles them at once beforehand, core/harness/autotune.py compile_ahead)
COMPILE_AHEAD_ENV = "ARENA_AUTOTUNE_COMPILE_AHEAD"
CHECKED_CALLS_PER_ROUND = 2  # timed calls per round whose outputs are checked (docs/integrity.md)
CPU_CANDIDATE_MEMORY = 2 << 30  # private memory a candidate may add on the CPU device (RLIMIT_DATA)
SIM_CANDIDATE_MEMORY = (
    32 << 30
)  # ... on a sim: device: GPU-sized CPU tensors, mostly never-written zero pages (address space, not RSS)
TASK_FILES = ("reference.py", "baseline.py", "inputs.py", "check.py", "task.yaml")
TASK_SOURCES = ("reference.py", "baseline.py", "inputs.py", "check.py")
WARMUP_CALLS = {
    "wall": 0,
    "events": 2,
    "queued": 2,
    "graph": 4,
}  # untimed calls per round, by timing mode


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


MAX_ROUNDS = 32  # a workload's alternations on a GPU, the extra rounds included (Timing)


@dataclass(frozen=True)
class Timing:
    """How long each side is timed per workload, in rounds that alternate candidate and
    baseline: `alternations` rounds of `budget_ms / alternations` a side, fewer once both
    medians' 95% intervals are within ±`ci_target` and the rounds' paired ratios agree after at
    least `min_rounds` (None: every round; `ci_target` 0: no early stop), and up to
    `extra_rounds` more while they have not settled: a large kernel whose rounds read a few
    percent apart (prefill attention on the H200: 0.93-1.05 in four rounds of one identical
    source) is timed until its ratio is known rather than cut at a fixed count. On a GPU that
    is up to MAX_ROUNDS in all: a host-bound call whose rounds read 10-15% apart as the host's
    CPU changes speed needs about that many for its ratio's interval to narrow to ±3%
    (timing.wide; docs/fidelity.md)."""

    alternations: int
    budget_ms: float
    min_calls: int
    max_calls: int
    min_rounds: int | None = None
    ci_target: float = CI_TARGET
    extra_rounds: int = 0
    # A side's round on a GPU at most this long on the host's clock, each call's refill and
    # flushes included (timing.Round.wall_ms); None: only `budget_ms` (device time) counts.
    round_wall_ms: float | None = None
    shared_io: bool = True  # False: the old path, inputs drawn in the candidate's process (measurements: docs/integrity.md)
    # Where the baseline is timed: None, in a worker of its own on every timed device
    # (core/harness/baseline_worker.py); False: in the trusted worker on its own inputs, the
    # old path (tests, before/after measurements: docs/fidelity.md, "The CPU device").
    baseline_worker: bool | None = None
    # Alternations timed call by call, after the first (core/harness/interleaved.py): None,
    # where the baseline's calls wait on the host (timing.waits_on_host); True or False forces
    # it for every round timed eagerly (tests, before/after measurements).
    interleave: bool | None = None

    @classmethod
    def for_device(cls, device_type: str, profile: Profile | str | None = None) -> Timing:
        train = parse_profile(profile) is Profile.TRAIN
        if device_type == "cpu":
            # The CPU device runs Triton in an interpreter: about a second per workload (full).
            if train:
                return cls(alternations=2, budget_ms=200.0, min_calls=1, max_calls=50, min_rounds=1)
            return cls(alternations=3, budget_ms=500.0, min_calls=1, max_calls=50, min_rounds=2)
        if train:
            # At most 32 calls a round: each call costs the harness about 0.8 ms (the trusted
            # worker's refill, a frame each way, a flush) whatever the kernel's own time, and a
            # microsecond kernel's rounds never stop early; the identity held with 32 as with 64
            # on the H200 and a batch's timed phase fell by a third (docs/performance.md).
            return cls(
                alternations=4,
                budget_ms=40.0,
                min_calls=3,
                max_calls=32,
                min_rounds=2,
                extra_rounds=MAX_ROUNDS - 4,
            )
        # A round of at most 1,000 calls and 80 ms on the host's clock: without the clock's
        # cap a microsecond kernel's rounds filled their 20 ms of device time with 1,000
        # calls whose refills and flushes cost the host 0.3-1 ms each, and `full` spent
        # 23-27 s of a 9-workload evaluation timing it (docs/performance.md).
        return cls(
            alternations=5,
            budget_ms=100.0,
            min_calls=3,
            max_calls=1000,
            min_rounds=2,
            extra_rounds=MAX_ROUNDS - 5,
            round_wall_ms=80.0,
        )

    def to_job(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "min_rounds": self.alternations if self.min_rounds is None else self.min_rounds,
        }


class SettingError(ValueError):
    """An ARENA_* environment setting the engine cannot use: the message names it and the fix."""


def _timing_setting(env: str, choices: tuple[str, ...]) -> str:
    """The value of the setting `env` names, the first of `choices` (the default) when unset."""
    default = choices[0]
    asked = os.environ.get(env, default).strip().lower() or default
    if asked not in choices:
        raise SettingError(
            f"{env}={asked!r}: expected one of {', '.join(choices)} (unset it for the default, {default})"
        )
    return asked


def timing_placement() -> str:
    """Where a graph round's capture lies (TIMING_PLACEMENT_ENV): `fixed` unless the
    environment names another of TIMING_PLACEMENTS."""
    return _timing_setting(TIMING_PLACEMENT_ENV, TIMING_PLACEMENTS)


def timing_events() -> str:
    """Where a graph round's timing events lie (TIMING_EVENTS_ENV): `outside` unless the
    environment names another of TIMING_EVENTS."""
    return _timing_setting(TIMING_EVENTS_ENV, TIMING_EVENTS)


def spec_json(spec: TensorSpec) -> dict[str, Any]:
    return spec.to_json()


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


DRAWN_BYTES_FACTOR = 2.0  # a drawn workload's tensors: at most this × the largest declared's


def within_declared_bytes(task: Task, declared: list[Workload]) -> Callable[[Workload], bool]:
    """Which drawn hidden workloads a job takes: those whose declared tensors take at most
    DRAWN_BYTES_FACTOR times the bytes of the task's largest visible or fixed hidden workload.
    A draw re-picks axes within the task's ranges on a fixed workload's others, so a batch
    axis drawn at its top on a long-context base made tensors 17 times the largest declared
    workload's (decode_paged_local: two 16 GiB KV caches, out of an H200's memory in the
    trusted worker, 2026-12-03). A shape that cannot be sized here (a multi-rank task's, before
    its world size) is taken."""
    sizes = [task.tensor_bytes(w.axes) for w in declared]
    largest = max((b for b in sizes if b is not None), default=0)

    def fits(w: Workload) -> bool:
        size = task.tensor_bytes(w.axes)
        return not largest or size is None or size <= DRAWN_BYTES_FACTOR * largest

    return fits


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
    baseline_impl: str | None = None,
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
    files as staged before any candidate ran (`Evaluator` passes them; default: read now).
    `baseline_impl` names one of task.yaml's `baselines:` to time against (the run's choice: an
    imported KernelBench task's `eager` or `torch_compile`); where the task declares no such
    one, the task's own order applies."""
    profile = parse_profile(profile)
    spec = SPECS[profile]
    limits = limits or task.limits
    rng = random.Random(secret_seed)
    simulated = (
        info.type == "sim"
    )  # correctness as the CPU device does; performance predicted at GPU sizes
    world = world_size_for(task, info, world_size)
    sets = task.workloads(cpu=info.type in ("cpu", "sim"))
    hidden = (
        []
        if visible_only
        else sets.hidden.resolve(
            rng, within_declared_bytes(task, [*sets.visible, *sets.hidden.fixed])
        )
    )
    visible, fixed_hidden = list(sets.visible), list(sets.hidden.fixed)
    if world is not None:
        visible, fixed_hidden, hidden = (
            [task.at_world(w, world) for w in ws] for ws in (visible, fixed_hidden, hidden)
        )

    def shapes(w: Workload) -> dict[str, list[int]]:
        return task.tensor_shapes(w.axes)

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
        known = sim_baseline(task, w, info, roof) if simulated else None
        stale = bool(known and known.get("stale"))
        # the model's count of the baseline, to anchor the candidate's prediction (sim/anchors.py)
        anchor = sim_anchor(task, w, info) if simulated and known and not stale else None
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
                # the GPU would replay this workload from a CUDA graph (the arena's timer does
                # below GRAPH_BELOW_US of roofline): its launches cost what a graph's do (sim/model.py)
                **({"gpu_graph": roof is not None and roof < GRAPH_BELOW_US} if simulated else {}),
                **(
                    {
                        "formula": {
                            "flops": task.flops_for(w),
                            "bytes": task.bytes_for(w),
                            "bytes_hold": task.bytes_hold,
                            "dtype": task.peak,
                        }
                    }
                    if simulated
                    else {}
                ),
                **({"measured_baseline": known} if known and not stale else {}),
                # measured with another baseline: predicted, and the result says why (verdict.assemble)
                **({"baseline_note": known["note"]} if known and stale else {}),
                **({"anchor": anchor} if anchor else {}),
                **(
                    {"scaled": scaled}
                    if simulated and (scaled := scaled_json(task, w)) is not None
                    else {}
                ),
            }
        )
    timing = timing or Timing.for_device("cpu" if simulated else info.type, profile)
    default_memory = {"cpu": CPU_CANDIDATE_MEMORY, "sim": SIM_CANDIDATE_MEMORY}.get(info.type)
    memory = candidate_memory_bytes if candidate_memory_bytes is not None else default_memory
    sim = sim_section(info, task.family) if simulated else None
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
            **({"aot": sim["aot"], "properties": sim["properties"]} if sim else {}),
            # a GPU's memory bounds how many of a batch's candidates run at once (concurrent.py)
            **(
                {"memory_bytes": int(info.memory_gb * 1e9)}
                if info.memory_gb and info.type not in ("cpu", "sim")
                else {}
            ),
        },
        "inputs": [spec_json(s) for s in task.inputs],
        "outputs": [spec_json(s) for s in task.outputs],
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
        "autotune_configs": spec.autotune_configs,
        "autotune_rep_ms": spec.autotune_rep_ms,
        "autotune_compile_ahead": os.environ.get(COMPILE_AHEAD_ENV, "on") != "off",
        "timing": {
            "kind": info.timing_kind,
            "sync_each_call": sync_each_call,
            "checked_calls": CHECKED_CALLS_PER_ROUND,
            **timing.to_job(),
            "round_factor": spec.round_factor,
            # the CPU a GPU's timed rounds run on, both sides (core/harness/performance.py)
            "pin_cpu": os.environ.get(TIMING_CPU_ENV, "auto"),
            "placement": timing_placement(),
            "events": timing_events(),
            "round_floor_s": spec.round_floor_s,
        },
        "limits": {
            "compile_s": min(limits.compile_s, spec.compile_cap_s),
            "correctness_s": limits.correctness_s,
            "performance_s": limits.performance_s
            + value_check_allowance_s(performance if timed_stage else [], sim),
            "call_s": min(spec.call_s, limits.correctness_s),
            "candidate_memory_bytes": memory,
        },
        "workdir": str(workdir),
        **(
            {"baseline_impl": baseline_impl}
            if baseline_impl and task.baseline_impl(baseline_impl) is not None
            else {}
        ),
        **({"world_size": world} if world is not None else {}),
        **({"sim": sim} if sim else {}),
        **({"predicted_collectives": predicted} if predicted else {}),
    }


def task_dtypes(task: Task) -> list[str]:
    return sorted({s.dtype for s in task.inputs + task.outputs})


# What a `sim:` performance stage's limit grows by per GPU workload, in budgets of the trusted
# side's reference (core/harness/sim/reference.py, `ARENA_SIM_REFERENCE_S`): the budget, once
# more for an op that runs past it inside torch (it is checked between Python steps only: a
# grouped fp8 GEMM's reference took 39 s against 30 on two cores), and the judge.
VALUE_CHECK_BUDGETS = 2.0


def value_check_allowance_s(performance: list[dict[str, Any]], sim: dict[str, Any] | None) -> float:
    """What a `sim:` device's performance stage adds to the task's limit: its trusted worker
    computes the reference at each GPU workload on the CPU (the value check), within a budget
    per workload. That is the arena's time, not the candidate's: on two slow cores ten of them
    filled fp8_blockscale_grouped_gemm's 300 s before any count was slow, and its starter
    ended `infrastructure_error` (docs/integrity.md)."""
    if sim is None or not performance:
        return 0.0
    from core.harness.sim.reference import BUDGET_S

    budget = float(os.environ.get("ARENA_SIM_REFERENCE_S") or BUDGET_S)
    return VALUE_CHECK_BUDGETS * budget * len(performance)


def job_deadline_s(job: dict[str, Any]) -> float:
    """The whole job's limit: its stages' (compile, correctness and generalization, performance)
    and a minute for the harness's own start and end."""
    limits = job["limits"]
    return (
        float(limits["compile_s"])
        + 2 * float(limits["correctness_s"])
        + float(limits["performance_s"])
        + 60.0
    )
