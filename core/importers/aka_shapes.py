"""An AgentKernelArena task's shapes as the arena's axes: which arguments are tensors, sizes,
flags or read off a tensor's shape (`Layout`), each dimension as an expression over the axes, and
the hidden shapes (the visible ones scaled to sizes that are not powers of two)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.harness.pysource import parse_module
from core.importers.aka_replay import Captured
from core.importers.aka_runner import Runner
from core.importers.kernelbench_problem import ProblemError, not_power_of_two

HIDDEN_FACTORS = (0.7, 1.3)  # the visible shapes scaled by these give the hidden ones
MULTIPLES = (
    1,
    8,
    16,
    64,
    256,
)  # hidden sizes rounded to these, in turn, where a kernel needs divisible sizes


@dataclass
class Layout:
    arg_names: list[str]  # every positional argument, then keyword arguments, in call order
    tensor: dict[str, tuple[list[str | int], str]]  # name -> (dims, dtype)
    fixed: dict[str, Any]  # arguments baked into run: the same in every shape used
    kw_names: list[str]
    n_positional: int
    outputs: list[list[str | int]]  # each returned output's dims (in-place ones: [])
    shapes: list[tuple[Any, ...]]  # every shape the task uses, visible then hidden
    derived: dict[str, list[int]]  # axes no shape entry gives simply: their value at each shape
    # integer arguments that change with the shape but are, at every shape, one dimension of a
    # tensor argument (`head_size` = q.shape[-1]): run reads them off that tensor, name -> (tensor, dim)
    from_shape: dict[str, tuple[str, int]] = field(default_factory=dict)

    def axes(self, runner: Runner, shape: tuple[Any, ...], sizes: list[int]) -> dict[str, int]:
        i = self.shapes.index(shape)
        return {**axes_of(runner, shape, sizes), **{a: v[i] for a, v in self.derived.items()}}


def read_layout(
    runner: Runner,
    source_file: Path,
    calls: list[Captured],
    runs: list[list[tuple[tuple[int, ...], str, int | None]]],
    shapes: list[tuple[Any, ...]],
    sizes: list[int],
) -> Layout:
    import torch

    first = calls[0]
    n_pos = len(first.call_args)
    kw_names = list(first.call_kwargs)
    values = [list(c.call_args) + [c.call_kwargs.get(k) for k in kw_names] for c in calls]
    params = _parameters(source_file, runner.entry)
    names = [params[i] if i < len(params) else f"arg{i}" for i in range(n_pos)] + kw_names
    tensor: dict[str, tuple[list[str | int], str]] = {}
    fixed: dict[str, Any] = {}
    derived: dict[str, list[int]] = {}
    axis_values = [axes_of(runner, s, sizes) for s in shapes]

    def dims_of(label: str, per_shape: list[tuple[int, ...]]) -> list[str | int]:
        if len({len(p) for p in per_shape}) != 1:
            raise ProblemError("shapes", f"`{label}` changes rank across shapes")
        dims: list[str | int] = []
        for d in range(len(per_shape[0])):
            column = [int(p[d]) for p in per_shape]
            try:
                dims.append(_dim_expr(column, axis_values))
            except (
                ProblemError
            ):  # a size the runner computes (num_writes + 8): recorded per workload
                axis = f"{label}_d{d}"
                derived[axis] = column
                dims.append(axis)
        return dims

    varying: list[tuple[str, list[Any]]] = []
    tensor_shapes: dict[str, list[tuple[int, ...]]] = {}
    for j, name in enumerate(names):
        column = [v[j] for v in values]
        if all(isinstance(v, torch.Tensor) for v in column):
            tensor_shapes[name] = [tuple(v.shape) for v in column]
            tensor[name] = (
                dims_of(name, tensor_shapes[name]),
                str(column[0].dtype).removeprefix("torch."),
            )
        elif all(_same(v, column[0]) for v in column):
            fixed[name] = column[0]
        else:
            varying.append((name, column))
    from_shape = {name: _shape_source(name, column, tensor_shapes) for name, column in varying}
    outputs = []
    for k, (_, _, inplace) in enumerate(runs[0]):
        label = f"out{k}" if len(runs[0]) > 1 else "out"
        outputs.append([] if inplace is not None else dims_of(label, [r[k][0] for r in runs]))
    return Layout(names, tensor, fixed, kw_names, n_pos, outputs, shapes, derived, from_shape)


def _same(a: Any, b: Any) -> bool:
    """Whether an argument is the same at two shapes: plain values compared; a tensor or a
    list of tensors (a set of weights) is never a value `run` could fix."""
    import torch

    def holds_tensors(x: Any) -> bool:
        return isinstance(x, torch.Tensor) or (
            isinstance(x, (list, tuple)) and any(holds_tensors(y) for y in x)
        )

    if type(a) is not type(b) or holds_tensors(a) or holds_tensors(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a value whose == raises is not one run can fix
        return False


def _shape_source(
    name: str, column: list[Any], tensor_shapes: dict[str, list[tuple[int, ...]]]
) -> tuple[str, int]:
    """The (tensor argument, dimension) that equals integer argument `name` at every shape; a
    `scalar_arg` ProblemError where there is none (a block size the runner picks, say)."""
    if all(type(v) is int for v in column):
        for tname, per_shape in tensor_shapes.items():
            for d in range(len(per_shape[0])):
                if all(p[d] == v for p, v in zip(per_shape, column)):
                    return tname, d
    raise ProblemError(
        "scalar_arg",
        f"argument `{name}` is a {type(column[0]).__name__} that changes with the shape and is no tensor argument's dimension: "
        "only tensors, and integers read off their shapes, may vary",
    )


def _parameters(source_file: Path, entry: str) -> list[str]:
    """The entry's positional parameter names, from the source file (nothing is imported)."""
    for node in ast.walk(parse_module(source_file.read_text(), str(source_file))):
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return []


def _dim_expr(sizes: list[int], axes: list[dict[str, int]]) -> str | int:
    """A dimension as an axis, k × axis, axis // k, a product of two axes, or a constant."""
    if (
        len(set(sizes)) == 1
        and len(axes) > 1
        and all(len({a[n] for a in axes}) > 1 for n in axes[0])
    ):
        return sizes[0]
    names = list(axes[0])
    for n in names:
        if all(s == a[n] for s, a in zip(sizes, axes)):
            return n
    for n in names:
        for k in (2, 3, 4, 8, 16, 32, 64, 128):
            if all(s == k * a[n] for s, a in zip(sizes, axes)):
                return f"{k} * {n}"
            if all(a[n] % k == 0 and s == a[n] // k for s, a in zip(sizes, axes)):
                return f"{n} // {k}"
        for m in names:
            if m >= n and all(s == a[n] * a[m] for s, a in zip(sizes, axes)):
                return f"{n} * {m}"
    if len(set(sizes)) == 1:
        return sizes[0]
    raise ProblemError(
        "shapes", f"a dimension ({sizes}) follows no axis of {', '.join(names)} simply"
    )


def hidden_candidates(
    usable: list[tuple[Any, ...]], sizes: list[int]
) -> list[list[tuple[int, tuple[Any, ...]]]]:
    """Two groups of (multiple, hidden shape) to try in order, the first that passes the checks
    taken from each: the largest shape scaled by 1.3 and the smallest by 0.7, to sizes that are
    not powers of two (plain, then multiples of 8, 16, 64 and 256 where the kernel needs
    divisible sizes)."""
    picks = [
        max(usable, key=lambda s: volume(s, sizes)),
        min(usable, key=lambda s: volume(s, sizes)),
    ]
    groups: list[list[tuple[int, tuple[Any, ...]]]] = []
    seen: list[tuple[Any, ...]] = list(usable)
    for base, factor in zip(picks, HIDDEN_FACTORS[::-1]):
        group = []
        for multiple in MULTIPLES:
            shape = tuple(
                not_power_of_two(v * factor, multiple) if i in sizes and v >= 4 else v
                for i, v in enumerate(base)
            )
            if shape not in seen and shape != base:
                group.append((multiple, shape))
                seen.append(shape)
        groups.append(group)
    return groups


def volume(shape: tuple[Any, ...], sizes: list[int]) -> int:
    v = 1
    for i in sizes:
        v *= max(1, int(shape[i]))
    return v


def axes_of(runner: Runner, shape: tuple[Any, ...], sizes: list[int]) -> dict[str, int]:
    return {runner.names[i]: int(shape[i]) for i in sizes}
