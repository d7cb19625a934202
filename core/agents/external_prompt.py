"""PROMPT.md for an external task (core/tasks/external.py): what to edit, the task's own commands,
and how it is scored by its own rules. The agent's workspace also holds a copy of the task's
files in `task/` to read and run; the evaluation uses the task's own copy, never that one."""

from __future__ import annotations

from typing import Any

from core.agents.workspace import prompt_head

WORKSPACE_COPY = "task"


def external_prompt(task: Any, device_id: str, budget_s_text: str, extra: str = "") -> str:
    spec = task.external
    editable = spec.editable[0]
    lines = [
        *prompt_head(task),
        f"Edit `solution.py` in this folder: it replaces `{editable}` of the task, whole (it starts as a copy of it).",
        f"Languages: {', '.join(task.languages)}. `{WORKSPACE_COPY}/` holds the task's own files (its scripts, tests and data) to read and run.",
        "",
    ]
    if task.vendor_notes:
        lines += ["## The task's instructions", "", task.vendor_notes.strip(), ""]
    lines += [
        f"## The device: `{device_id}`",
        "",
        "## How it is scored",
        "",
        f"This is an external task: its own commands check and time it, and {spec.rules}'s rules score it. When the attempt",
        f"ends, a fresh copy of the task gets `solution.py` as `{editable}` and runs, in the arena's sandbox, in this order:",
        *(
            f"- {stage}: `{line}`"
            for stage in ("compile", "correctness", "performance")
            for line in spec.commands.get(stage, ())
        ),
        "",
        "A stage passes when its commands exit 0; correctness also fails when its output says `fail` and nowhere `pass`.",
        "The performance command then times the untouched source the same way; the speedup is the mean of the per-case",
        "ratios (baseline time / your time). Points: 20 compiled, +100 correct, +100 x speedup.",
        "",
        "## Your budget",
        "",
        f"- wall-clock time: {budget_s_text}; at the limit you are stopped and `solution.py` is scored as it is.",
        "",
        "## Checking your work",
        "",
        "Run `arena check` in this folder: it runs the task's commands on `solution.py` as the final evaluation does. Or run them",
        f"yourself: copy `solution.py` over `{WORKSPACE_COPY}/{editable}` and run the commands above inside `{WORKSPACE_COPY}/`.",
    ]
    if extra.strip():
        lines += ["", extra.strip()]
    return "\n".join(lines) + "\n"
