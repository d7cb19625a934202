"""The tasks as the server shows and finds them, never on the event loop.

Loading every task (`discover`: each task.yaml parsed and checked) takes seconds under load, and
`GET /tasks` used to do it on the loop at every call, which held up every other request
(/health took seconds). Here the answer is built in a worker thread, once, and kept until the
task folders change: each call takes a cheap fingerprint of them (the task.yaml files' paths,
sizes and modification times, in a thread too), and builds again only when it differs. Calls
that arrive while a build runs wait for that one build. Finding one task by id
(`Arena.task`, cached per id) also runs in a thread, and its errors are a 400 that names the field."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from arena_tui.web.errors import HttpError
from core.rl.env import signature
from core.tasks.discovery import discover, tasks_root
from core.tasks.fields import TaskError, UnknownTaskError


def fingerprint(root: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when a task is added, removed or edited: every task.yaml's path, size and
    modification time (its folder's files are checked by the task manifest, not here)."""
    out = []
    for path in sorted(root.glob("*/*/task.yaml")):
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


class TaskCatalog:
    def __init__(self, tasks_dir: Path | str | None) -> None:
        self.tasks_dir = tasks_dir
        self._answer: tuple[Any, dict[str, Any]] | None = None  # (fingerprint, /tasks's answer)
        self._building: tuple[Any, asyncio.Future[dict[str, Any]]] | None = None
        self.builds = 0  # how many times the answer was built (tests)

    async def tasks(self) -> dict[str, Any]:
        stamp = await asyncio.to_thread(fingerprint, tasks_root(self.tasks_dir))
        if self._answer is not None and self._answer[0] == stamp:
            return self._answer[1]
        if self._building is None or self._building[0] != stamp:
            self._building = (stamp, asyncio.ensure_future(asyncio.to_thread(self._build)))
        building = self._building
        try:
            answer = await asyncio.shield(building[1])
        finally:
            if self._building is building and building[1].done():
                self._building = None
        self._answer = (stamp, answer)
        return answer

    def _build(self) -> dict[str, Any]:
        self.builds += 1
        return {
            "tasks": [
                {
                    "id": t.id,
                    "description": t.description,
                    "signature": signature(t),
                    "languages": list(t.languages),
                    "baseline": t.baseline,
                    "visible_workloads": {
                        "gpu": [w.to_json() for w in t.gpu.visible],
                        "cpu": [w.to_json() for w in t.cpu.visible],
                    },
                }
                for t in discover(self.tasks_dir)
            ]
        }


async def find(arena: Any, task_id: str, field: str = "task_id") -> Any:
    """`arena.task(task_id)` in a thread (the first time it reads the task's folder); a task id
    that names no task, or cannot be a path at all (a NUL byte, too long), is a 400."""
    if "\x00" in task_id or len(task_id) > os.pathconf("/", "PC_PATH_MAX"):
        raise HttpError(400, f"`{field}` is not a task id: use one GET /tasks lists", field)
    try:
        return await asyncio.to_thread(arena.task, task_id)
    except (UnknownTaskError, TaskError) as exc:
        raise HttpError(400, str(exc), field) from None
    except (OSError, ValueError) as exc:
        raise HttpError(
            400, f"`{field}` is not a task id ({exc}): use one GET /tasks lists", field
        ) from None
