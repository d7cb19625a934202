"""The sections of task.yaml that need more than one field read: inputs and outputs (`tensor`),
workloads and the hidden set (`workload_sets`), a multi-rank task's `world_size` and `collective`,
the declared `baselines`. Each raises TaskError naming the field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from core.model.formulas import formula_names
from core.model.task import DEFAULT_IMPL, BaselineImpl, Collective, TensorSpec, WorldSize
from core.model.workload import WORLD_AXIS, Draw, HiddenSet, Workload, WorkloadSets
from core.tasks.fields import Fields, TaskError
from core.tasks.vocabulary import (
    BASELINE_KINDS,
    COLLECTIVES,
    DTYPES,
    INIT_DISTS,
    WORKLOAD_META,
)


def read_baselines(top: Fields, kind: str) -> tuple[BaselineImpl, ...]:
    """`baselines:` — the implementations baseline.py tries, best first: `{impl, kind, calls}`
    each; the last must need nothing but torch (it is what runs where no library imports).
    Without the key, the one candidate is `baseline` itself, named `torch`."""
    if "baselines" not in top.data:
        return (BaselineImpl(DEFAULT_IMPL, kind, str(top.data.get("baseline", ""))),)
    raw = top.get(
        "baselines",
        list,
        "list the implementations baseline.py tries, best first: `- {impl: liger, kind: vendor_kernel_library, calls: ...}`",
    )
    if not raw:
        top.fail(
            "is empty",
            "list at least the torch fallback: `- {impl: torch, kind: torch_composition, calls: ...}`",
            "baselines",
        )
    out = []
    for i, entry in enumerate(raw):
        f = Fields(top.path, entry, f"baselines[{i}]")
        f.no_unknown(("impl", "kind", "calls"))
        name = f.get(
            "impl",
            str,
            "name the implementation as baseline.py's IMPL reports it, e.g. liger, flashinfer, torch",
        )
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.+-]*", name):
            f.fail(
                f"`{name}` is not a plain name",
                "use lower-case letters, digits and _ . + -",
                "impl",
            )
        entry_kind = f.get("kind", str, f"one of {', '.join(BASELINE_KINDS)}")
        if entry_kind not in BASELINE_KINDS:
            f.fail(f"`{entry_kind}` is unknown", f"use one of {', '.join(BASELINE_KINDS)}", "kind")
        out.append(
            BaselineImpl(
                name,
                entry_kind,
                str(f.get("calls", str, "say in one line what this implementation calls")).strip(),
            )
        )
    names = [b.impl for b in out]
    if len(set(names)) != len(names):
        top.fail(
            f"names repeat: {', '.join(names)}",
            "give every implementation its own `impl` name",
            "baselines",
        )
    if out[0].kind != kind:
        top.fail(
            f"the preferred implementation `{out[0].impl}` is `{out[0].kind}` but baseline_kind is `{kind}`",
            "make baseline_kind the kind of the first (preferred) entry of `baselines:`",
            "baseline_kind",
        )
    return tuple(out)


def read_world_size(top: Fields, axes: dict[str, str]) -> WorldSize | None:
    """The optional `world_size: {sizes: [2, 4, 8], cpu: 2}` of a multi-rank task."""
    if "world_size" not in top.data:
        return None  # a single-device task; W is then an ordinary axis name
    if WORLD_AXIS in axes:
        top.fail(
            f"`{WORLD_AXIS}` is reserved in multi-rank tasks: the harness sets it to the world size",
            f"remove `{WORLD_AXIS}` from `axes:`; shapes and formulas may still use it",
            "axes",
        )
    f = Fields(top.path, top.data["world_size"], "world_size")
    f.no_unknown(("sizes", "cpu"))
    sizes = f.get("sizes", list, "list the world sizes the task supports, e.g. [2, 4, 8]")
    if not sizes or not all(
        isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 64 for n in sizes
    ):
        f.fail(
            f"{sizes!r} is not a list of world sizes",
            "give integers from 1 to 64, e.g. [2, 4, 8]",
            "sizes",
        )
    cpu = f.get("cpu", int, "the CPU device's world size, one of `sizes` (2 keeps CI short)", 2)
    if cpu not in sizes:
        f.fail(
            f"{cpu} is not one of sizes {sizes}",
            "choose the CPU device's world size among `sizes`",
            "cpu",
        )
    return WorldSize(tuple(sorted(set(sizes))), cpu)


def read_collective(
    top: Fields, formula_axes: dict[str, str], world_size: WorldSize | None
) -> Collective | None:
    if "collective" not in top.data:
        return None
    if world_size is None:
        top.fail(
            "is given but the task has no `world_size`",
            "add `world_size: {sizes: [2, 4, 8], cpu: 2}` (a collective runs on several ranks)",
            "collective",
        )
    f = Fields(top.path, top.data["collective"], "collective")
    f.no_unknown(("kind", "bytes"))
    kind = f.get("kind", str, f"one of {', '.join(COLLECTIVES)}")
    if kind not in COLLECTIVES:
        f.fail(
            f"`{kind}` is unknown",
            f"use one of {', '.join(COLLECTIVES)} (the nccl-tests operation whose bus-bandwidth factor applies)",
            "kind",
        )
    expr = str(
        f.get("bytes", (str, int), "the nccl-tests size S in bytes per rank, e.g. 2 * T * H")
    )
    unknown = f.undeclared(expr, formula_axes, "bytes", "the axes and W")
    if unknown:
        f.fail(
            f"uses undeclared symbol(s) {', '.join(sorted(unknown))}",
            "use the declared axes and W",
            "bytes",
        )
    return Collective(kind, expr)


def read_tensor(path: Path, raw: Any, where: str, axes: dict[str, str], output: bool) -> TensorSpec:
    f = Fields(path, raw, where)
    f.no_unknown(
        ("name", "shape", "dtype", "inplace_of", "atomic")
        if output
        else ("name", "shape", "dtype", "init", "value")
    )
    name = f.get("name", str, "give it a name")
    dtype = f.get("dtype", str, f"one of {', '.join(DTYPES)}")
    if dtype not in DTYPES:
        f.fail(f"`{dtype}` is not a supported dtype", f"use one of {', '.join(DTYPES)}", "dtype")
    value = f.get("value", (int, float), "a number", None)
    shape_raw = f.get("shape", list, "a list of axis names or integers, e.g. [M, K]", None)
    if output and shape_raw is None and "inplace_of" not in f.data:
        f.fail("is missing", "give the output's shape, e.g. [M, N]", "shape")
    if not output and (shape_raw is None) == (value is None):
        f.fail(
            "an input has either a `shape` (a tensor) or a `value` (a scalar)",
            "give exactly one of them",
        )
    shape = None
    if shape_raw is not None:
        for dim in shape_raw:
            if isinstance(dim, bool) or not (
                (isinstance(dim, int) and dim > 0)
                or (isinstance(dim, str) and _is_axis_expr(dim, axes))
            ):
                f.fail(
                    f"dimension {dim!r} is neither a positive integer nor arithmetic over declared axes",
                    "declare it under `axes:`",
                    "shape",
                )
        shape = tuple(shape_raw)
    init = f.get("init", dict, "e.g. {dist: normal, std: 1.0}", None)
    if init is not None:
        dist = init.get("dist")
        if dist not in INIT_DISTS:
            f.fail(f"dist `{dist}` is unknown", f"use one of {', '.join(INIT_DISTS)}", "init.dist")
        extra = set(init) - {"dist", *INIT_DISTS[dist]}
        if extra:
            f.fail(
                f"unknown key(s) {', '.join(sorted(extra))}",
                f"{dist} takes {', '.join(INIT_DISTS[dist])}",
                "init",
            )
        if dist != "normal" and not init.get("low", 0) < init.get("high", 1):
            f.fail("needs low < high", "e.g. {dist: uniform, low: -1, high: 1}", "init")
    return TensorSpec(
        name=name,
        dtype=dtype,
        shape=shape,
        init=init,
        value=value,
        inplace_of=f.get("inplace_of", str, "an input's name", None),
        atomic=f.get("atomic", bool, "true where honest kernels write it with atomics", False),
    )


def _is_axis_expr(dim: str, axes: dict[str, str]) -> bool:
    try:
        return formula_names(dim) <= set(axes)
    except (SyntaxError, ValueError):
        return False


def read_workloads(path: Path, raw: Any, where: str, axes: dict[str, str]) -> tuple[Workload, ...]:
    if not isinstance(raw, list) or not raw:
        raise TaskError(
            path,
            where,
            "must be a non-empty list",
            "list workloads as `- {M: 16, N: 4096, K: 4096}`",
        )
    result = []
    for i, item in enumerate(raw):
        f = Fields(path, item, f"{where}[{i}]")
        f.no_unknown(tuple(axes) + WORKLOAD_META)
        values = {}
        for axis in axes:
            v = f.get(axis, int, "give every axis a positive integer")
            if v <= 0:
                f.fail(f"is {v}", "give a positive integer", axis)
            values[axis] = v
        result.append(Workload(values, f.data.get("model"), f.data.get("note")))
    return tuple(result)


def read_workload_sets(path: Path, f: Fields, axes: dict[str, str]) -> WorkloadSets:
    visible = read_workloads(
        path, f.get("visible", list, "list the visible workloads"), f.at("visible"), axes
    )
    h = Fields(
        path,
        f.get("hidden", dict, "add `hidden: {fixed: [...], draw: {count, ranges}}`"),
        f.at("hidden"),
    )
    h.no_unknown(("fixed", "draw"))
    fixed = read_workloads(
        path, h.get("fixed", list, "list the fixed hidden workloads"), h.at("fixed"), axes
    )
    draw = None
    if "draw" in h.data:
        d = Fields(path, h.data["draw"], h.at("draw"))
        d.no_unknown(("count", "ranges"))
        count = d.get("count", int, "how many workloads to draw, e.g. 2")
        ranges_raw = d.get("ranges", dict, "e.g. {M: [1, 4096]}")
        ranges = {}
        for axis, bounds in ranges_raw.items():
            if axis not in axes:
                d.fail(f"`{axis}` is not a declared axis", "draw only declared axes", "ranges")
            if not (
                isinstance(bounds, list)
                and len(bounds) == 2
                and all(isinstance(b, int) and b > 0 for b in bounds)
                and bounds[0] < bounds[1]
            ):
                d.fail(
                    f"{axis}: {bounds!r} is not [low, high]",
                    "give two positive integers, low < high",
                    "ranges",
                )
            ranges[axis] = (bounds[0], bounds[1])
        if count < 1 or not ranges:
            d.fail("draws nothing", "give count >= 1 and at least one range")
        draw = Draw(count, ranges)
    visible_labels = {w.label for w in visible}
    for i, w in enumerate(fixed):
        if w.label in visible_labels:
            raise TaskError(
                path,
                f"{h.at('fixed')}[{i}]",
                f"{w.label} is also a visible workload",
                "make hidden workloads differ from visible ones",
            )
    if not any(not _power_of_two(v) for w in fixed for v in w.axes.values()):
        raise TaskError(
            path,
            h.at("fixed"),
            "has no size that is not a power of two",
            "add a workload with an odd or irregular size (e.g. M=77)",
        )
    return WorkloadSets(visible, HiddenSet(fixed, draw))


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0
