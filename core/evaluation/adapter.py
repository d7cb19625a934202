"""Candidates as another benchmark's users write them.

An imported task may ship `adapter.py`: Python code that gives a candidate a `run`. Its
`ADAPTS = "name"` says what the candidate must define instead: KernelBench's `ModelNew` class
(core/importers/kb_modules.py), or an AgentKernelArena task's entry function, as in the task's
source file (core/importers/aka_modules.py). A candidate that defines no `run` but that name
is evaluated as itself followed by the adapter: the file a KernelBench or AgentKernelArena user
already has is accepted as it is. A candidate that defines `run` is never adapted.

The adapted copy is written into the evaluation's own folder with the candidate's native
siblings; the result's candidate hash stays that of the file the user gave.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from core.harness.pysource import parse_module
from core.model.candidate import native_siblings
from core.model.task import Task

ADAPTER = "adapter.py"


def adapts(task: Task) -> str | None:
    """The name a candidate without `run` must define for `task` (its adapter's ADAPTS), or None."""
    path = task.path / ADAPTER
    if not path.is_file():
        return None
    try:
        tree = parse_module(path.read_text(), str(path))
    except SyntaxError:
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "ADAPTS" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def needs_adapter(task: Task, candidate: Path) -> bool:
    """Whether `candidate` is one the task's adapter completes: it parses, defines no `run` and
    defines (or imports) what the adapter needs."""
    name = adapts(task)
    if name is None:
        return False
    try:
        tree = parse_module(candidate.read_bytes(), str(candidate))
    except (SyntaxError, OSError, ValueError):
        return False
    defined = top_level_names(tree)
    return "run" not in defined and name in defined


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level: functions, classes, assignments, imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def adapted(task: Task, candidate: Path, folder: Path) -> Path:
    """The candidate to evaluate: `candidate` itself, or (where the task's adapter completes it)
    a copy followed by the adapter, written under `folder` with the native sources beside it."""
    if not needs_adapter(task, candidate):
        return candidate
    target_dir = folder / "adapted"
    target_dir.mkdir(parents=True, exist_ok=True)
    for sibling in native_siblings(candidate):
        shutil.copyfile(sibling, target_dir / sibling.name)
    target = target_dir / candidate.name
    source = candidate.read_text().rstrip()
    target.write_text(f"{source}\n{(task.path / ADAPTER).read_text()}")
    return target
