"""FLOP and byte formulas (and shape expressions) of task.yaml: arithmetic over the axes, parsed
with `ast` and checked node by node, never `eval`ed as Python."""

from __future__ import annotations

import ast
import math

from core.harness.pysource import compile_expression, parse_expression

_FORMULA_FUNCS = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor, "log2": math.log2}
# The nodes of any arithmetic over names; each grammar adds the operators (and calls) it allows.
EXPRESSION_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load)
_FORMULA_NODES = (
    *EXPRESSION_NODES,
    ast.Call,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.USub,
    ast.UAdd,
)


def formula_names(expr: str) -> set[str]:
    tree = parse_expression(expr)
    for node in ast.walk(tree):
        if not isinstance(node, _FORMULA_NODES):
            raise ValueError(f"`{ast.unparse(node)}` is not plain arithmetic")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _FORMULA_FUNCS
        ):
            raise ValueError(f"only {', '.join(_FORMULA_FUNCS)} may be called")
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}  # type: ignore[attr-defined]
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - calls


def evaluate_formula(expr: str, axes: dict[str, int]) -> float:
    """Evaluate a FLOP or byte formula: arithmetic over the axes, nothing else."""
    formula_names(expr)  # rejects anything but arithmetic
    code = compile_expression(parse_expression(expr), "<formula>")
    return float(eval(code, {"__builtins__": {}, **_FORMULA_FUNCS}, dict(axes)))
