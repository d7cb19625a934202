"""Sizing a KernelBench problem's workloads: which of its constants scale, the hidden GPU sizes
(the problem's scaled off powers of two, within what the target device holds), CPU sizes small
enough for the interpreter, and the FLOPs, bytes and peak a task's roofline uses.

The caps, each stated in the task's provenance and docs/interop.md:

- a hidden GPU workload moves at most `hidden_cap(...)`: the larger of upstream's own bytes and
  1 GB (a problem already at gigabytes is only scaled down), and at most 1/8 of the target
  device's memory (the harness holds a workload several times: the candidate's and the trusted
  process's inputs, the reference's and the candidate's outputs, the next timed call's inputs);
- a CPU workload aims at 2 MB and 5·10⁷ FLOPs, scales no constant below 8 (or its own value,
  where smaller: a sequence of one hides a missing causal mask) unless the model's own size
  leaves nothing else under the caps (then 4, 2, 1), and must stay under 100 MB and 10¹⁰
  FLOPs, else the problem has no CPU workload and is not converted.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.importers.kernelbench_problem import (
    Probe,
    Problem,
    ProblemError,
    TensorInfo,
    not_power_of_two,
)

CPU_BYTES = (
    2 << 20
)  # a CPU workload aims at moving at most this much (inputs, parameters, outputs) ...
CPU_FLOPS = 5e7  # ... and computing at most this much, where the scalable constants allow
CPU_CAP_BYTES = (
    100 * 10**6
)  # ... and never more than this (the model's own size may force it up to here)
CPU_CAP_FLOPS = (
    1e10  # ... and 10 GFLOPs (a ResNet block at batch 1: seconds in eager PyTorch on a core)
)
CPU_FLOOR = 8  # no constant is scaled below min(this, its own value) for the CPU
HIDDEN_FACTORS = (0.75, 1.3)  # the fixed hidden GPU workloads, relative to the problem's sizes
FALLBACK_FACTORS = (0.6, 0.9, 0.5)  # tried, in order, where a factor above would pass the cap
GROWTH_BYTES = 10**9  # a hidden workload may be larger than upstream's own only while under this
DEVICE_SHARE = 8  # a hidden workload moves at most 1/DEVICE_SHARE of the target's memory
DEFAULT_DEVICE_GB = 80.0  # KernelBench's reference GPU (H100, 80 GB)

FLOP_AXIS, BYTE_AXIS = "flop_count", "byte_count"


def hidden_cap(base: Probe, device_gb: float) -> int:
    """The most bytes a hidden GPU workload may move (see the module's docstring)."""
    return int(min(max(base.nbytes, GROWTH_BYTES), device_gb * 1e9 / DEVICE_SHARE))


def scalable_constants(problem: Problem, base: Probe) -> tuple[list[str], list[str]]:
    """The constants that really scale: doubling each must still run."""
    keep, dropped = [], []
    for c in problem.scalable:
        try:
            problem.probe({c: 2 * base.constants[c]})
            keep.append(c)
        except ProblemError as exc:
            dropped.append(f"`{c}` kept fixed (doubling it fails: {exc.reason.split(': ', 1)[-1]})")
    return keep, dropped


def hidden_probes(
    problem: Problem,
    around: Probe,
    scalable: list[str],
    factors: Iterable[float],
    avoid: Iterable[Probe] = (),
    cap: int | None = None,
    want: int = 2,
) -> list[Probe]:
    """Up to `want` workloads, one per factor tried in order: every scalable constant scaled near
    `factor` times its value, to a size that is not a power of two (a multiple of 8, then of 64,
    where the model needs divisible sizes), never the same setting twice, and moving at most
    `cap` bytes."""
    found: list[Probe] = []
    taken = [around.constants, *(p.constants for p in avoid)]
    for f in factors:
        if len(found) >= want:
            break
        for multiple in (1, 8, 64):
            setting = {c: _near(around.constants[c], f, multiple) for c in scalable}
            if setting in taken:
                continue
            try:
                probe = problem.probe(setting)
            except ProblemError:
                continue
            if cap is not None and probe.nbytes > cap:
                break  # larger multiples only grow it
            found.append(probe)
            taken.append(setting)
            break
    return found


def _near(value: int, factor: float, multiple: int) -> int:
    """A size near value × factor that is not a power of two and differs from `value`."""
    if multiple > 1 and value < 4 * multiple:
        multiple = 1  # small sizes: divisibility would move them too far
    target = max(1, round(value * factor))
    n = not_power_of_two(target, multiple)
    if n == value and value > multiple:
        n = not_power_of_two(value + (multiple if factor > 1 else -multiple), multiple)
    if n == value:  # tiny sizes (a batch of 1): step up, differently per direction
        n = not_power_of_two(value + (2 if factor < 1 else 4))
    return n


def cpu_ladder(
    problem: Problem, base: Probe, scalable: list[str], cap_bytes: int = CPU_CAP_BYTES
) -> tuple[list[Probe], str | None]:
    """CPU workloads to choose from, the preferred first: the largest common down-scaling of the
    scalable constants that fits the CPU's aim (each constant at least min(8, its value); 4, 2,
    then 1 only where the model's own size leaves nothing else under the caps), then the larger
    settings above it that stay within the caps (used where the preferred one is degenerate: a
    lazy output passes there). A note where the aim could not be met; ProblemError (`cpu_size`)
    where nothing fits the caps."""
    tried: list[Probe] = []
    for floor in (CPU_FLOOR, 4, 2, 1):
        tried = _halvings(problem, base, scalable, floor)
        if any(_within(p, cap_bytes) for p in tried):
            break
    if not tried:
        raise ProblemError("cpu_size", "no down-scaled size runs on the meta device")
    within = [p for p in tried if _within(p, cap_bytes)]
    if not within:
        low = tried[-1]
        raise ProblemError(
            "cpu_size",
            f"its smallest CPU size still moves {low.nbytes / 1e6:.0f} MB and computes {probe_flops(low):.2g} FLOPs "
            f"(caps {cap_bytes / 1e6:.0f} MB, {CPU_CAP_FLOPS:.0e}; its parameters alone are "
            f"{sum(p.nbytes for p in low.params) / 1e6:.0f} MB): no CPU workload",
        )
    ladder = [within[-1], *within[-2::-1]]  # the smallest first, then larger ones
    best = ladder[0]
    note = (
        None
        if best.nbytes <= CPU_BYTES and probe_flops(best) <= CPU_FLOPS
        else f"the CPU workload moves {best.nbytes / 1e6:.1f} MB and {probe_flops(best):.2g} FLOPs (the model's own sizes do not scale further)"
    )
    return ladder, note


def _halvings(problem: Problem, base: Probe, scalable: list[str], floor: int) -> list[Probe]:
    """The problem with every scalable constant halved k = 0, 1, 2, ... times (never below
    min(floor, its value)), largest first, until a setting meets the CPU's aim."""
    floors = {c: min(floor, base.constants[c]) for c in scalable}
    tried: list[Probe] = []
    previous: dict[str, int] | None = None
    for k in range(0, 24):
        setting = {c: max(floors[c], int(base.constants[c] * 0.5**k)) for c in scalable}
        if setting == previous:
            break  # every constant at its floor
        previous = setting
        try:
            probe = problem.probe(setting)
        except ProblemError:
            continue
        tried.append(probe)
        if probe.nbytes <= CPU_BYTES and probe_flops(probe) <= CPU_FLOPS:
            break
    return tried


def _within(p: Probe, cap_bytes: int) -> bool:
    return p.nbytes <= cap_bytes and probe_flops(p) <= CPU_CAP_FLOPS


def probe_flops(p: Probe) -> int:
    """torch's count; where it counts nothing (no matmul, conv or attention), one per element read."""
    return p.flops or sum(numel_of(t.shape) for t in p.inputs if isinstance(t, TensorInfo))


def peak_for(precision: str, probe: Probe) -> str:
    """The compute peak that bounds the problem. torch's FLOP counter counts only matmul,
    convolution and attention ops, and those run on tensor cores even in fp32: cuDNN
    convolutions use TF32 by default in PyTorch (KernelBench's reference runs them so), as does
    Triton's `tl.dot` on fp32 inputs. Bounding them by the vector fp32 rate flagged the
    problem's own eager Model as faster than light on the H200 (a 3x3 conv at 76 TFLOP/s
    against 67), so they take the 16-bit tensor-core peak: a floor nothing honest beats (TF32
    runs at half of it), at the cost of a lower speed-of-light fraction."""
    if precision in ("bf16", "fp16") or probe.flops:
        return "bf16"
    return "fp32"


def numel_of(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
