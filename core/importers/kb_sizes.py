"""Sizing a KernelBench problem's workloads: which of its constants scale, the hidden GPU sizes
(the problem's scaled off powers of two), a CPU workload small enough for the interpreter, and
the FLOPs, bytes and peak a task's roofline uses."""

from __future__ import annotations

from collections.abc import Iterable

from core.importers.kernelbench_problem import (
    Probe,
    Problem,
    ProblemError,
    TensorInfo,
    not_power_of_two,
)

CPU_BYTES = 2 << 20  # a CPU workload moves at most this much (inputs, parameters, outputs) ...
CPU_FLOPS = 5e7  # ... and computes at most this much, where the scalable constants allow
HIDDEN_FACTORS = (0.75, 1.3)  # the fixed hidden GPU workloads, relative to the problem's sizes


FLOP_AXIS, BYTE_AXIS = "flop_count", "byte_count"


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
) -> list[Probe]:
    """One workload per factor: every scalable constant scaled near `factor` times its value, to
    a size that is not a power of two (a multiple of 8, then of 64, where the model needs
    divisible sizes), and never the same setting twice."""
    found: list[Probe] = []
    taken = [around.constants, *(p.constants for p in avoid)]
    for f in factors:
        for multiple in (1, 8, 64):
            setting = {c: _near(around.constants[c], f, multiple) for c in scalable}
            if setting in taken:
                continue
            try:
                probe = problem.probe(setting)
            except ProblemError:
                continue
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


def cpu_probe(problem: Problem, base: Probe, scalable: list[str]) -> tuple[Probe, str | None]:
    """The largest common down-scaling of the scalable constants that fits a CPU call."""
    best = base
    for k in range(0, 16):
        s = 0.5**k
        setting = {c: max(1, int(base.constants[c] * s)) for c in scalable}
        try:
            probe = problem.probe(setting)
        except ProblemError:
            continue
        best = probe
        if probe.nbytes <= CPU_BYTES and probe_flops(probe) <= CPU_FLOPS:
            return probe, None
        if all(v == 1 for v in setting.values()):
            break
    return (
        best,
        f"the CPU workload still moves {best.nbytes / 1e6:.1f} MB and {probe_flops(best):.2g} FLOPs (the model's own sizes do not scale)",
    )


def probe_flops(p: Probe) -> int:
    """torch's count; where it counts nothing (no matmul, conv or attention), one per element read."""
    return p.flops or sum(numel_of(t.shape) for t in p.inputs if isinstance(t, TensorInfo))


def peak_for(precision: str, probe: Probe) -> str:
    """The compute peak that bounds the problem. torch's FLOP counter counts only matmul,
    convolution and attention ops, and those run on tensor cores even in fp32: cuDNN
    convolutions use TF32 by default in PyTorch, as does Triton's `tl.dot` on fp32 inputs, and
    KernelBench's fp32 tolerance (1e-2) admits it. Bounding them by the vector fp32 rate
    flagged the problem's own eager Model as faster than light on the H200 (a 3x3 conv at 76
    TFLOP/s against 67), so they take the 16-bit tensor-core peak: a floor nothing honest
    beats (TF32 runs at half of it), at the cost of a lower speed-of-light fraction."""
    if precision in ("bf16", "fp16") or probe.flops:
        return "bf16"
    return "fp32"


def numel_of(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
