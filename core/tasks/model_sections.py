"""task.yaml's `model_workloads` (how a model's operations give the task's rows) and
`workloads.models` (the rows add-model wrote). Each problem raises TaskError naming the field."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from core.harness.pysource import parse_expression
from core.model.formulas import EXPRESSION_NODES, formula_names
from core.model.workload import ModelWorkloads, Workload, WorkloadSets
from core.tasks.fields import Fields, TaskError
from core.tasks.sections import read_workloads
from core.tasks.vocabulary import MODEL_KEYS, OP_KINDS, PHASES

SECTION_KEYS = (
    "op",
    "note",
    "requires",
    "excludes",
    "only",
    "expert_parallel",
    "axes",
    "probe",
    "phases",
)
_MODEL_EXPR_NODES = (
    *EXPRESSION_NODES,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.USub,
)


def _expr_problem(expr: str, names: tuple[str, ...] | list[str], over: str) -> str | None:
    """Why `expr` is not integer arithmetic (+ - * // and parentheses) over `names`, or None."""
    try:
        tree = parse_expression(expr)
    except SyntaxError:
        return f"`{expr}` is not an expression"
    for node in ast.walk(tree):
        if not isinstance(node, _MODEL_EXPR_NODES) or (
            isinstance(node, ast.Constant) and (type(node.value) is not int)
        ):
            return f"`{expr}` uses `{ast.unparse(node)}`; only integers, + - * // and parentheses are allowed"
    unknown = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(names))
    if unknown:
        return f"`{expr}` uses unknown {over} {', '.join(unknown)}"
    return None


def read_model_workloads(
    path: Path, top: Fields, axes: dict[str, str]
) -> tuple[ModelWorkloads, ...]:
    """The optional `model_workloads`: one section (a mapping) or a list of them."""
    if "model_workloads" not in top.data:
        return ()
    raw = top.data["model_workloads"]
    if isinstance(raw, list):
        if not raw:
            top.fail(
                "is an empty list", "give one section or a list of sections", "model_workloads"
            )
        return tuple(
            read_section(path, Fields(path, s, f"model_workloads[{i}]"), axes)
            for i, s in enumerate(raw)
        )
    return (read_section(path, Fields(path, raw, "model_workloads"), axes),)


def _key_list(f: Fields, name: str, example: str) -> tuple[str, ...]:
    listed = f.data.get(name, [])
    if not isinstance(listed, list):
        f.fail(f"{listed!r} is not a list", f"list normalized model keys, e.g. {example}", name)
    for key in listed:
        if key not in MODEL_KEYS:
            f.fail(
                f"`{key}` is not a normalized config key",
                f"use one of {', '.join(MODEL_KEYS)}",
                name,
            )
    return tuple(str(k) for k in listed)


def read_section(path: Path, f: Fields, axes: dict[str, str]) -> ModelWorkloads:
    keys = ", ".join(MODEL_KEYS)
    f.no_unknown(SECTION_KEYS)
    op = f.get("op", str, f"one of {', '.join(OP_KINDS)}", "model")
    if op not in OP_KINDS:
        f.fail(f"`{op}` is not an operation kind", f"use one of {', '.join(OP_KINDS)}", "op")
    if "requires" not in f.data and op == "model":
        f.get(
            "requires",
            list,
            f"list the normalized config keys the model must have, e.g. [num_experts] (one of {keys})",
        )
    requires = _key_list(f, "requires", "[num_experts]")
    excludes = _key_list(f, "excludes", "[n_group]")
    only: dict[str, tuple[float, ...]] = {}
    o = Fields(path, f.get("only", dict, "", {}), f.at("only"))
    for key, values in o.data.items():
        if key not in MODEL_KEYS:
            o.fail(f"`{key}` is not a normalized config key", f"use one of {keys}", str(key))
        listed = values if isinstance(values, list) else [values]
        if not listed or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in listed
        ):
            o.fail(
                f"{values!r} is not a number or a list of numbers",
                "give the values the task computes with, e.g. [2.5, 2.827]",
                str(key),
            )
        only[str(key)] = tuple(float(v) for v in listed)
    ep = f.get("expert_parallel", int, "the ranks a model's experts are spread over, e.g. 8", None)
    if ep is not None and ep < 1:
        f.fail(f"is {ep}", "give a positive number of ranks, e.g. 8", "expert_parallel")
    names = list(MODEL_KEYS)
    rules = Fields(
        path,
        f.get("axes", dict, "give every axis an expression over config keys or a list of integers"),
        f.at("axes"),
    )
    derived: dict[str, str | tuple[int, ...]] = {}
    for axis, rule in rules.data.items():
        axis = str(axis)
        if axis not in axes:
            rules.fail(
                f"`{axis}` is not a declared axis",
                f"derive only the axes declared under `axes:` ({', '.join(axes)})",
                axis,
            )
        if isinstance(rule, list):
            if not rule or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in rule
            ):
                rules.fail(
                    f"{rule!r} is not a list of positive integers",
                    "give token buckets such as [1, 128, 4096]",
                    axis,
                )
            derived[axis] = tuple(rule)
        elif isinstance(rule, (str, int)) and not isinstance(rule, bool):
            problem = _expr_problem(str(rule), names, "config key(s)")
            if problem:
                rules.fail(
                    problem, f"write arithmetic (+ - * // and parentheses) over {keys}", axis
                )
            derived[axis] = str(rule)
        else:
            rules.fail(
                f"{rule!r} is neither an expression nor a list of integers",
                "e.g. `E: num_experts` or `T: [1, 128, 4096]`",
                axis,
            )
    missing = [a for a in axes if a not in derived]
    if missing:
        rules.fail(
            f"axis(es) {', '.join(missing)} have no rule",
            "give every declared axis an expression or a list of integers",
        )
    if (
        "local_experts"
        in {n for r in derived.values() if isinstance(r, str) for n in formula_names(r)}
        and ep is None
    ):
        f.fail(
            "uses local_experts without the convention that gives it",
            "declare `expert_parallel: 8` (local_experts = num_experts // 8)",
            "axes",
        )
    probe = Fields(path, f.get("probe", dict, "", {}), f.at("probe"))
    probes: dict[str, str] = {}
    for axis, rule in probe.data.items():
        if axis not in axes:
            probe.fail(f"`{axis}` is not a declared axis", "probe only declared axes", str(axis))
        problem = _expr_problem(str(rule), list(axes), "axis(es)")
        if problem:
            probe.fail(
                problem,
                "give an integer or arithmetic over the task's axes, e.g. `E: K`",
                str(axis),
            )
        probes[str(axis)] = str(rule)
    phases = f.get("phases", list, f"some of {', '.join(PHASES)}", list(PHASES))
    if not isinstance(phases, list) or any(p not in PHASES for p in phases):
        f.fail(f"{phases!r} is not a list of phases", f"use some of {', '.join(PHASES)}", "phases")
    return ModelWorkloads(
        requires=requires,
        axes={a: derived[a] for a in axes},
        excludes=excludes,
        op=op,
        only=only,
        expert_parallel=ep,
        probe=probes,
        phases=tuple(phases),
        note=str(f.get("note", str, "say which rows these are, e.g. qkv_proj", "")),
    )


def read_model_rows(
    path: Path, wl: Fields, axes: dict[str, str], gpu: WorkloadSets
) -> tuple[Workload, ...]:
    """`workloads.models`: the rows add-model wrote, GPU sizes each naming its model; none may
    repeat a hidden workload (that would make it public)."""
    raw: Any = wl.data.get("models")
    if raw is None:
        return ()
    rows = read_workloads(path, raw, wl.at("models"), axes)
    hidden = {w.label for w in gpu.hidden.fixed}
    for i, w in enumerate(rows):
        if not w.model:
            raise TaskError(
                path, f"{wl.at('models')}[{i}]", "names no model", "add `model: NAME` to the row"
            )
        if w.label in hidden:
            raise TaskError(
                path,
                f"{wl.at('models')}[{i}]",
                f"{w.label} is a hidden workload",
                "remove the row: a model row is public",
            )
    return rows
