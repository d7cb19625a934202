"""Judging a call's outputs: the task's check.py where it has one, else the elementwise rule.

One function for every place that asks "are these outputs right?": the trusted worker (a
candidate's outputs) and `arena tasks validate` (zeros, constant and random outputs must
fail), so both apply exactly the same rule. Like the rest of core/harness it imports nothing
else from `core` (a task's check.py may import core.harness.compare itself).

check.py contract (docs/task-format.md): `check(outputs, expected, inputs) -> {name: {passed,
message?, max_abs_err?, ...}}` for every declared output; it runs in the trusted process only.
A stochastic output (a sampler) may also return `evidence` (a dict of numbers) in a verdict and
define `check_pooled({name: [evidence of each checked call so far]}) -> {name: verdict}`: the
trusted worker keeps one `Pool` per workload and asks it after every call, so a bias too small
for one call's test still fails once the workload's calls add up (docs/integrity.md, class 4).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from core.harness import compare

Check = Callable[[list[torch.Tensor], list[torch.Tensor], list[Any]], dict[str, dict[str, Any]]]


class CheckError(ValueError):
    """The task's check is broken (not the candidate): it returned no verdict for an output,
    or the reference returned the wrong number of outputs. A task bug, reported as such."""


Pooled = Callable[[dict[str, list[dict[str, Any]]]], dict[str, dict[str, Any]]]


def _module(source: bytes | str, filename: str) -> types.ModuleType:
    module = types.ModuleType("arena_task_check")
    module.__file__ = filename
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def check_from_source(source: bytes | str, filename: str) -> Check:
    """The `check` function of check.py's text (the worker holds the hash-checked source)."""
    return checks_from_source(source, filename)[0]


def checks_from_source(source: bytes | str, filename: str) -> tuple[Check, Pooled | None]:
    """check.py's `check` and its optional `check_pooled`."""
    module = _module(source, filename)
    check = getattr(module, "check", None)
    if not callable(check):
        raise CheckError(
            f"{filename} defines no `check`: add `def check(outputs, expected, inputs) -> dict[str, dict]`"
        )
    pooled = getattr(module, "check_pooled", None)
    return check, pooled if callable(pooled) else None


ALL = "*"  # the pool of every checked call of the evaluation


class Pool:
    """The evidence of each workload's checked calls, and of all of them together (a bias
    spread thin over several workloads adds up there; one confined to a shape, such as greedy
    at B = 1, stands out in its workload's pool), for check.py's `check_pooled`."""

    def __init__(self, pooled: Pooled | None):
        self.pooled = pooled
        self.evidence: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def add(self, workload: str, verdicts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """One call's verdicts, with its evidence taken out and pooled; an output that passed
        alone but fails pooled gets the pooled verdict."""
        verdicts = {name: dict(v) for name, v in verdicts.items()}
        found = {
            name: v.pop("evidence")
            for name, v in verdicts.items()
            if isinstance(v.get("evidence"), dict)
        }
        if self.pooled is None or not found:
            return verdicts
        for key, what in (
            (workload, "the workload's checked calls"),
            (ALL, "every checked call of the evaluation"),
        ):
            pool = self.evidence.setdefault(key, {})
            for name, evidence in found.items():
                pool.setdefault(name, []).append(evidence)
            pooled = self.pooled({name: list(calls) for name, calls in pool.items()})
            if not isinstance(pooled, dict):
                raise CheckError(
                    f"check_pooled returned a {type(pooled).__name__}; it must return {{output name: {{passed: bool, ...}}}}"
                )
            for name, v in pooled.items():
                if (
                    name in verdicts
                    and verdicts[name].get("passed")
                    and isinstance(v, dict)
                    and v.get("passed") is False
                ):
                    verdicts[name] = {
                        **v,
                        "message": f"pooled over {what}: {v.get('message') or 'rejected by check_pooled'}",
                    }
        return verdicts


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
        raise CheckError(
            f"{len(outputs)} output(s) to judge; the task declares {len(names)}: {', '.join(names)}"
        )
    if check is None:
        if len(expected) != len(names):
            raise CheckError(
                f"reference.run returned {len(expected)} tensor(s) for {len(names)} declared output(s): without check.py it "
                "must return exactly the declared outputs (extra tensors are for a check.py)"
            )
        return {
            name: compare.compare(
                got.to(want.device), want, rule["atol"], rule["rtol"], rule["min_match"]
            )
            for name, got, want in zip(names, outputs, expected)
        }
    verdicts = check(list(outputs), list(expected), list(inputs))
    if not isinstance(verdicts, dict):
        raise CheckError(
            f"check.py returned a {type(verdicts).__name__}; it must return {{output name: {{passed: bool, ...}}}}"
        )
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
