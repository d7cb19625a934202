"""Reading an AgentKernelArena runner (`scripts/task_runner.py`) without running it: its
`TEST_SHAPES`, the names its loop unpacks each shape into, the entry `run_compile()` asserts, and
the comparison its `run_correctness` makes (aka_replay.py runs it)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.harness.pysource import parse_module
from core.importers.kernelbench_problem import ProblemError


@dataclass
class Runner:
    """What the template says: shapes, the names each is unpacked into, the entry, the tolerance."""

    path: Path
    tree: ast.Module
    shapes: list[tuple[Any, ...]]
    names: list[str]
    entry: str
    tolerance: Tolerance

    @classmethod
    def read(cls, folder: Path, config: dict[str, Any]) -> Runner:
        path = folder / "scripts" / "task_runner.py"
        if not path.is_file():
            raise ProblemError(
                "external", "has no scripts/task_runner.py: it runs its own commands"
            )
        tree = parse_module(path.read_text(), str(path))
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        shapes = _test_shapes(tree)
        if shapes is None or not {"run_correctness", "load_module", "run_compile"} <= set(defs):
            raise ProblemError(
                "off_template",
                "its runner does not follow the generated template (TEST_SHAPES, load_module, run_correctness)",
            )
        names = _loop_names(defs["run_correctness"])
        if not names:
            raise ProblemError(
                "off_template",
                "run_correctness does not unpack `enumerate(TEST_SHAPES)` into names",
            )
        kernels = set(config.get("target_kernel_functions") or [])
        entries = [n for n in _hasattr_names(defs["run_compile"]) if n not in kernels]
        if not entries:
            raise ProblemError(
                "off_template", "run_compile names no entry function (hasattr) besides the kernels"
            )
        return cls(path, tree, shapes, names, entries[0], _tolerance(tree, defs["run_correctness"]))


def _test_shapes(tree: ast.Module) -> list[tuple[Any, ...]] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TEST_SHAPES" for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            if isinstance(value, list) and value:
                return [tuple(v) if isinstance(v, (tuple, list)) else (v,) for v in value]
    return None


def _loop_names(fn: ast.FunctionDef) -> list[str]:
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Call)
            and getattr(node.iter.func, "id", None) == "enumerate"
        ):
            if (
                node.iter.args
                and isinstance(node.iter.args[0], ast.Name)
                and node.iter.args[0].id == "TEST_SHAPES"
            ):
                target = node.target
                if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                    inner = target.elts[1]
                    if isinstance(inner, ast.Tuple) and all(
                        isinstance(e, ast.Name) for e in inner.elts
                    ):
                        return [e.id for e in inner.elts]  # type: ignore[union-attr,attr-defined]
                    if isinstance(inner, ast.Name):
                        return [inner.id]
    return []


def _hasattr_names(fn: ast.FunctionDef) -> list[str]:
    names = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "hasattr"
            and len(node.args) == 2
        ):
            arg = node.args[1]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.append(arg.value)
    return names


TORCH_ALLCLOSE = (1e-8, 1e-5)  # torch.allclose's own atol, rtol where the runner gives none


@dataclass(frozen=True)
class Tolerance:
    """The runner's own comparison: `atol`, `rtol` of its allclose, or exact (0, 0) where it
    compares with torch.equal only; `how` says which, for the task's provenance."""

    atol: float
    rtol: float
    how: str


def _tolerance(tree: ast.Module, fn: ast.FunctionDef) -> Tolerance:
    """What run_correctness (and the module's functions it calls) compares with. Several
    allclose tolerances: the loosest of each (the runner's rule for one output is not applied
    to another). torch.equal alongside allclose (a mask's -inf placement beside its values):
    the allclose tolerance; torch.equal alone: exact equality."""
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    called = {
        c.func.id
        for c in ast.walk(fn)
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in helpers
    }
    close: list[tuple[float, float]] = []
    equal = False
    for body in [fn, *(helpers[n] for n in sorted(called - {"load_module"}))]:
        for node in ast.walk(body):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            if name == "equal":
                equal = True
            elif name in ("allclose", "isclose", "assert_close"):
                kw = {k.arg: k.value for k in node.keywords}
                try:
                    atol = (
                        float(ast.literal_eval(kw["atol"])) if "atol" in kw else TORCH_ALLCLOSE[0]
                    )
                    rtol = (
                        float(ast.literal_eval(kw["rtol"])) if "rtol" in kw else TORCH_ALLCLOSE[1]
                    )
                except ValueError:
                    raise ProblemError(
                        "tolerance",
                        f"its {name} tolerance is not a literal: {ast.unparse(node)[:120]}",
                    ) from None
                close.append((atol, rtol))
    if close:
        atol, rtol = max(a for a, _ in close), max(r for _, r in close)
        how = f"the runner's own {'allclose' if len(set(close)) == 1 else 'loosest allclose'}: atol {atol:g}, rtol {rtol:g}"
        return Tolerance(
            atol, rtol, how + (" (it also compares some values with torch.equal)" if equal else "")
        )
    if equal:
        return Tolerance(0.0, 0.0, "exact equality, as the runner's torch.equal")
    raise ProblemError(
        "tolerance",
        "run_correctness compares with neither allclose nor torch.equal: its rule cannot be read",
    )
