"""A task's Python files (inputs.py, reference.py, check.py, baseline.py, starter.py) loaded one
at a time, as the tests of a task's pieces use them. Each call runs the file afresh, so module
globals (a baseline's IMPL) start clean; the module is not put in sys.modules."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import torch

TASKS = Path(__file__).resolve().parent.parent / "tasks"


def load_module(path: Path, name: str | None = None) -> ModuleType:
    """Run the Python file at `path` as a fresh module (named after its folder and file)."""
    spec = importlib.util.spec_from_file_location(
        name or f"_task_file_{path.parent.name}_{path.stem}", path
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task_file(task: str | Path, name: str) -> ModuleType:
    """`name`.py of a task: a bundled task's id (`moe/fused_moe`) or a task folder."""
    folder = task if isinstance(task, Path) else TASKS / task
    return load_module(folder / f"{name}.py")


def task_inputs(task: str | Path, axes: dict, seed: int = 0) -> list:
    """The task's inputs.py draw for these axes, from a generator seeded with `seed`."""
    return task_file(task, "inputs").make_inputs(axes, torch.Generator().manual_seed(seed))
