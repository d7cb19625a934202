"""One KernelBench problem, understood: its size constants, which of them can be scaled, and
what its `Model` takes and returns at any sizes.

A KernelBench problem is a Python module with a `Model(nn.Module)`, module-level size
constants, `get_inputs()` (the forward's arguments) and `get_init_inputs()` (the constructor's).
The shapes live in code, not data, so they are found by running it: the module is executed
with chosen constants and the model runs on PyTorch's `meta` device, which computes shapes,
dtypes and FLOPs (torch's FlopCounterMode) without allocating or computing anything.

A constant is *scalable* when changing it changes only the inputs: it feeds `get_inputs()` and
nothing that builds the model (`get_init_inputs()` or the `Model` class, directly or through
other constants). Scaling those keeps the model, its parameters and every candidate written for
it valid, which is what hidden workloads need.
"""

from __future__ import annotations

import ast
import inspect
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.harness.pysource import parse_module

SKIP_NAMES = frozenset(
    {
        "dim",
        "axis",
        "dims",
        "stride",
        "padding",
        "dilation",
        "groups",
        "kernel_size",
        "output_padding",
    }
)
OVERRIDES = "__arena_overrides__"


class ProblemError(Exception):
    """A problem that cannot be converted; `kind` is the summary's category."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str  # a torch dtype name: float32, int64, …
    nbytes: int


@dataclass(frozen=True)
class Probe:
    """The problem at one setting of its constants, on the meta device."""

    constants: dict[str, int]
    inputs: tuple[
        TensorInfo | float | int, ...
    ]  # get_inputs(), in call order; numbers stay numbers
    params: tuple[TensorInfo, ...]  # the model's parameters, in named_parameters() order
    outputs: tuple[TensorInfo, ...]
    flops: int  # torch.utils.flop_counter; 0 when it counts nothing (no matmul or conv)

    @property
    def nbytes(self) -> int:
        tensors = (
            [t for t in self.inputs if isinstance(t, TensorInfo)]
            + list(self.params)
            + list(self.outputs)
        )
        return sum(t.nbytes for t in tensors)


@dataclass
class Problem:
    """A problem module and what its source says about its constants."""

    path: Path
    source: str
    tree: ast.Module
    constants: dict[str, Any]  # every module-level name assigned a value, in order
    scalable: list[str]  # int constants that feed only get_inputs()
    input_names: list[str]  # the forward's parameter names

    @classmethod
    def load(cls, path: Path) -> Problem:
        source = path.read_text()
        try:
            tree = parse_module(source, str(path))
        except SyntaxError as exc:
            raise ProblemError("syntax", f"does not parse: {exc.msg} (line {exc.lineno})") from None
        defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        for needed in ("Model", "get_inputs", "get_init_inputs"):
            if needed not in defs:
                raise ProblemError(
                    "format", f"defines no `{needed}`: not a KernelBench problem module"
                )
        namespace = _execute(tree, path, {})
        constants = {k: v for k, v in namespace.items() if k in _assigned_names(tree)}
        depends = _dependencies(tree)
        model_side = _closure(_loads(defs["get_init_inputs"]) | _loads(defs["Model"]), depends)
        input_side = _closure(_loads(defs["get_inputs"]), depends)
        scalable = [
            name
            for name, value in constants.items()
            if type(value) is int
            and value >= 2
            and name in input_side
            and name not in model_side
            and name.lower() not in SKIP_NAMES
        ]
        forward = getattr(namespace["Model"], "forward", None)
        try:
            params = list(inspect.signature(forward).parameters.values())[1:] if forward else []
        except (TypeError, ValueError):
            params = []
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return cls(path, source, tree, constants, scalable, names)

    def module(self, overrides: dict[str, int]) -> dict[str, Any]:
        """The problem's namespace with `overrides` applied where each constant is assigned, so
        constants computed from it (`input_shape = (num_classes,)`) follow."""
        return _execute(self.tree, self.path, overrides)

    def probe(self, overrides: dict[str, int]) -> Probe:
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        ns = self.module(overrides)
        try:
            with torch.device("meta"):
                args = list(ns["get_inputs"]())
                model = ns["Model"](*ns["get_init_inputs"]())
                with FlopCounterMode(display=False) as counter:
                    out = model(*args)
        except Exception as exc:  # noqa: BLE001 - the problem's own code may raise anything
            raise ProblemError(
                "meta",
                f"does not run on the meta device at {overrides or 'its own sizes'}: {type(exc).__name__}: {_one_line(exc)}",
            ) from None
        outs = out if isinstance(out, (tuple, list)) else [out]
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            raise ProblemError(
                "outputs", "forward returns something other than a tensor or a tuple of tensors"
            )
        names = (
            self.input_names
            if len(self.input_names) == len(args)
            else [f"x{i}" for i in range(len(args))]
        )
        inputs: list[TensorInfo | float | int] = []
        for name, a in zip(names, args):
            if isinstance(a, torch.Tensor):
                inputs.append(_info(name, a))
            elif isinstance(a, (int, float)) and not isinstance(a, bool):
                inputs.append(a)
            else:
                raise ProblemError(
                    "inputs",
                    f"get_inputs() returns a {type(a).__name__} for `{name}`: only tensors and numbers are supported",
                )
        params = tuple(_info(param_name(n), p) for n, p in model.named_parameters())
        out_names = ["out"] if len(outs) == 1 else [f"out{i}" for i in range(len(outs))]
        return Probe(
            constants={k: int(v) for k, v in self.module(overrides).items() if k in self.scalable},
            inputs=tuple(inputs),
            params=params,
            outputs=tuple(_info(n, o) for n, o in zip(out_names, outs)),
            flops=int(counter.get_total_flops()),
        )

    def buffers(self) -> list[str]:
        import torch

        ns = self.module({})
        with torch.device("meta"):
            model = ns["Model"](*ns["get_init_inputs"]())
        return [n for n, _ in model.named_buffers()]


def param_name(name: str) -> str:
    return "p_" + name.replace(".", "_")


def _info(name: str, t: Any) -> TensorInfo:
    dtype = str(t.dtype).removeprefix("torch.")
    return TensorInfo(
        name, tuple(int(d) for d in t.shape), dtype, int(t.numel()) * t.element_size()
    )


def _assigned_names(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for t in targets:
            names += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _dependencies(tree: ast.Module) -> dict[str, set[str]]:
    """For each module-level assigned name, the names its value reads."""
    deps: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        deps.setdefault(n.id, set()).update(_loads(node.value))
    return deps


def _closure(names: set[str], deps: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += deps.get(name, ())
    return seen


def _with_overrides(tree: ast.Module, names: set[str]) -> ast.Module:
    """After each module-level assignment of an overridden name, re-assign it from the overrides."""
    body: list[ast.stmt] = []
    for node in tree.body:
        body.append(node)
        assigned = set(_assigned_names(ast.Module(body=[node], type_ignores=[])))
        for name in sorted(assigned & names):
            body.append(parse_module(f"{name} = {OVERRIDES}[{name!r}]").body[0])
    return ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))


def _execute(tree: ast.Module, path: Path, overrides: dict[str, int]) -> dict[str, Any]:
    ns: dict[str, Any] = {
        "__name__": f"kernelbench_{path.stem}",
        "__file__": str(path),
        OVERRIDES: dict(overrides),
    }
    try:
        exec(compile(_with_overrides(tree, set(overrides)), str(path), "exec"), ns)
    except ModuleNotFoundError as exc:
        hint = (
            " (KernelBench level 4 also loads model weights from a hub)"
            if exc.name == "transformers"
            else ""
        )
        raise ProblemError(
            "dependency",
            f"imports `{exc.name}`, which is not installed here: pip install {exc.name}{hint}",
        ) from None
    except Exception as exc:  # noqa: BLE001 - the problem's module code may raise anything
        raise ProblemError(
            "module", f"its module code raised {type(exc).__name__}: {_one_line(exc)}"
        ) from None
    return ns


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def not_power_of_two(x: float, multiple: int = 1) -> int:
    """The integer nearest `x` (a multiple of `multiple`) that is not a power of two."""
    n = max(multiple, int(round(x / multiple)) * multiple)
    while n > 2 and n & (n - 1) == 0:
        n += multiple
    return n if n != 2 else 3 if multiple == 1 else n + multiple


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def log2_steps(x: float) -> int:
    return int(math.floor(math.log2(x))) if x > 0 else 0
