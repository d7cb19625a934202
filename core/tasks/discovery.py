"""Finding tasks: the bundled `tasks/` folder, `$ARENA_TASKS` or a folder given, every task in
it (`discover`), and one task by id or path with a suggestion when it is not there."""

from __future__ import annotations

import os
from pathlib import Path

from core.model.task import Task
from core.tasks.fields import UnknownTaskError
from core.tasks.spec import load_task


def bundled_tasks_root() -> Path:
    """The bundled `tasks/` folder: beside `core/` in a checkout and in site-packages alike."""
    return Path(__file__).resolve().parents[2] / "tasks"


def tasks_root(override: Path | str | None = None) -> Path:
    if override is not None:
        return Path(override)
    env = os.environ.get("ARENA_TASKS")
    return Path(env) if env else bundled_tasks_root()


def discover(root: Path | str | None = None) -> list[Task]:
    """Every task under `root`, sorted by id; a bad task raises its TaskError."""
    base = tasks_root(root)
    return [load_task(p.parent) for p in sorted(base.glob("*/*/task.yaml"))]


def task_ids(root: Path | str | None = None) -> list[str]:
    base = tasks_root(root)
    return [f"{p.parent.parent.name}/{p.parent.name}" for p in sorted(base.glob("*/*/task.yaml"))]


def find_task(task_id: str, root: Path | str | None = None) -> Task:
    """Load a task by id (`gemm/bf16_gemm`) or by folder path."""
    return load_task(task_folder(task_id, root))


def task_folder(task_id: str, root: Path | str | None = None) -> Path:
    """The folder of a task id (`gemm/bf16_gemm`, under `root`) or of a folder path; an unknown
    one raises UnknownTaskError with the ids it may have meant."""
    as_path = Path(task_id)
    if (as_path / "task.yaml").is_file():
        return as_path
    folder = tasks_root(root) / task_id
    if task_id.count("/") != 1 or not (folder / "task.yaml").is_file():
        known = task_ids(root)
        close = [t for t in known if task_id.split("/")[-1] in t]
        hint = (
            f"did you mean {', '.join(close)}?"
            if close
            else "run `arena tasks list` to see the ids"
        )
        raise UnknownTaskError(f"unknown task `{task_id}`: {hint}")
    return folder
