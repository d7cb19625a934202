"""The scaled workload of a `sim:` device's counted call (docs/integrity.md, "Simulated devices").

A pure PyTorch candidate is counted on fake tensors, at no cost, and run for real on GPU-sized
CPU tensors only where that run is cheap (`sim_predict.REAL_RUN_FLOPS`, `REAL_RUN_BYTES`). Above
that budget, the real run that checks its values is made at a *scaled* workload instead: the
GPU workload with its reduction axes shrunk first (the axes its inputs have and its outputs do
not: a GEMM's K, an attention's context length), then, where that is not enough, its largest
other axes, halved one step at a time until the task's own formulas put the call within half
the budget. Only axes of at least `SHRINKABLE` are halved, never below half of that and keeping
a multiple of 16 a multiple of 16: the small axes (experts, heads, top-k) that other axes must
respect stay as the GPU workload has them. So the output keeps the GPU workload's rows and columns where it can, and the same
candidate code runs as at GPU size; no size a candidate could learn separates the calls whose
values are checked from the one that is billed (which is held to the task's formulas besides).
"""

from __future__ import annotations

from typing import Any

from core.harness.sim.predict import REAL_RUN_BYTES, REAL_RUN_FLOPS
from core.model.formulas import formula_names
from core.model.task import Task
from core.model.workload import Workload

MAX_STEPS = 64  # halvings at most
SHRINKABLE = 64  # an axis is halved only from this size on (experts, heads, top-k stay as they are)


def _symbols(shape: tuple[str | int, ...] | None) -> set[str]:
    found: set[str] = set()
    for dim in shape or ():
        if isinstance(dim, str):
            found |= formula_names(dim)
    return found


def reduction_axes(task: Task) -> list[str]:
    """Axes the inputs' shapes use and the outputs' do not (an in-place output has its input's)."""
    by_name = {s.name: s for s in task.inputs}
    outputs: set[str] = set()
    for o in task.outputs:
        source = by_name.get(o.inplace_of or "") if o.shape is None else o
        outputs |= _symbols(source.shape if source is not None else None)
    inputs = set().union(*(_symbols(s.shape) for s in task.inputs))
    return sorted(inputs - outputs)


def _fits(task: Task, w: Workload, flops: float, nbytes: float) -> bool:
    return task.flops_for(w) <= flops and task.bytes_for(w) <= nbytes


def scaled_workload(
    task: Task,
    w: Workload,
    flops: float = REAL_RUN_FLOPS / 2,
    nbytes: float = REAL_RUN_BYTES / 2,
) -> Workload | None:
    """`w` shrunk until the task's formulas put it within `flops` and `nbytes`, or None when it
    fits already or cannot be shrunk to fit."""
    if _fits(task, w, flops, nbytes):
        return None
    axes = dict(w.axes)
    shaped = set().union(*(_symbols(s.shape) for s in task.inputs + task.outputs))
    grains = _grains(task)
    first = [a for a in reduction_axes(task) if a in grains]
    rest = [a for a in axes if a in shaped and a in grains and a not in first]
    for _ in range(MAX_STEPS):
        current = Workload(dict(axes), w.model, w.note)
        if _fits(task, current, flops, nbytes):
            return current
        for group in (first, rest):
            halves = {a: _half(int(axes[a]), grains[a]) for a in group}
            names = [a for a in group if int(axes[a]) >= SHRINKABLE and halves[a] < axes[a]]
            if names:
                name = max(names, key=lambda a: axes[a])
                axes[name] = halves[name]
                break
        else:
            return None
    return None


def _grains(task: Task) -> dict[str, int]:
    """The axes that may shrink, each with the power of two (at most 128) that divides all of
    its GPU workloads' values: a block-scaled K stays a multiple of its block. An axis with one
    value in every GPU workload (a head dimension) is the kernel's to assume: it stays."""
    values: dict[str, set[int]] = {}
    for w in (*task.gpu.visible, *task.gpu.hidden.fixed):
        for name, value in w.axes.items():
            if isinstance(value, int) and not isinstance(value, bool):
                values.setdefault(name, set()).add(value)
    grains = {}
    for name, seen in values.items():
        if len(seen) < 2 or name == "W":
            continue
        grain = 128
        while grain > 1 and any(v % grain for v in seen):
            grain //= 2
        grains[name] = grain
    return grains


def _half(n: int, grain: int) -> int:
    """About half of `n`, a multiple of `grain`, at least `SHRINKABLE` / 2 (else `n`)."""
    half = n // 2 - (n // 2) % grain
    return half if half >= max(grain, SHRINKABLE // 2) else n


def scaled_json(task: Task, w: Workload) -> dict[str, Any] | None:
    """The scaled workload as the job carries it (axes and concrete shapes), or None."""
    scaled = scaled_workload(task, w)
    if scaled is None:
        return None
    return {
        "axes": dict(scaled.axes),
        "shapes": task.tensor_shapes(scaled.axes),
        "label": ", ".join(f"{k}={v}" for k, v in scaled.axes.items()),
    }
