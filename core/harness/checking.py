"""Judging a call's outputs: the task's check.py where it has one, else the elementwise rule.

One function for every place that asks "are these outputs right?": the trusted worker (a
candidate's outputs) and `arena tasks validate` (zeros, constant and random outputs must
fail), so both apply exactly the same rule. Like the rest of core/harness it imports nothing
else from `core` (a task's check.py may import core.harness.compare itself).

check.py contract (docs/task-format.md): `check(outputs, expected, inputs) -> {name: {passed,
message?, max_abs_err?, ...}}` for every declared output; it runs in the trusted process only.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from . import compare

Check = Callable[[list[torch.Tensor], list[torch.Tensor], list[Any]], dict[str, dict[str, Any]]]


class CheckError(ValueError):
    """The task's check is broken (not the candidate): it returned no verdict for an output,
    or the reference returned the wrong number of outputs. A task bug, reported as such."""


def check_from_source(source: bytes | str, filename: str) -> Check:
    """The `check` function of check.py's text (the worker holds the hash-checked source)."""
    module = types.ModuleType("arena_task_check")
    module.__file__ = filename
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - the task's own file
    check = getattr(module, "check", None)
    if not callable(check):
        raise CheckError(f"{filename} defines no `check`: add `def check(outputs, expected, inputs) -> dict[str, dict]`")
    return check


def load_check(task_dir: Path | str) -> Check | None:
    """The task's `check` function, or None when the task has no check.py."""
    path = Path(task_dir) / "check.py"
    return check_from_source(path.read_bytes(), str(path)) if path.is_file() else None


def _name(spec: Any) -> str:
    return spec["name"] if isinstance(spec, dict) else spec.name


def judge(
    out_specs: Sequence[Any],
    outputs: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    inputs: Sequence[Any],
    rule: dict[str, float],
    check: Check | None = None,
) -> dict[str, dict[str, Any]]:
    """A verdict per declared output name: a dict with at least `passed` (and `message` when
    it failed). `out_specs` are the job's output dicts (or TensorSpecs); `rule` holds atol,
    rtol and min_match. Without `check`, output i is compared elementwise with expected[i]."""
    names = [_name(s) for s in out_specs]
    if len(outputs) != len(names):
        raise CheckError(f"{len(outputs)} output(s) to judge; the task declares {len(names)}: {', '.join(names)}")
    if check is None:
        if len(expected) != len(names):
            raise CheckError(
                f"reference.run returned {len(expected)} tensor(s) for {len(names)} declared output(s): without check.py it "
                "must return exactly the declared outputs (extra tensors are for a check.py)"
            )
        return {
            name: compare.compare(got.to(want.device), want, rule["atol"], rule["rtol"], rule["min_match"])
            for name, got, want in zip(names, outputs, expected)
        }
    verdicts = check(list(outputs), list(expected), list(inputs))
    if not isinstance(verdicts, dict):
        raise CheckError(f"check.py returned a {type(verdicts).__name__}; it must return {{output name: {{passed: bool, ...}}}}")
    result: dict[str, dict[str, Any]] = {}
    for name in names:
        v = verdicts.get(name)
        if not isinstance(v, dict) or not isinstance(v.get("passed"), bool):
            raise CheckError(
                f"check.py gave no verdict `{{passed: bool}}` for output `{name}`: it must return one verdict per declared output "
                f"({', '.join(names)})"
            )
        if not v["passed"] and not v.get("message"):
            v = {**v, "message": "rejected by the task's check.py"}
        result[name] = v
    return result
