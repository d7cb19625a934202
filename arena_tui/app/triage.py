"""Failed rows grouped by what went wrong, and what triage shows of each: the error, the
compiler output and the candidate's diff against the task's starter."""

from __future__ import annotations

import difflib
from pathlib import Path

from arena_tui.app.model import Row
from core.tasks.discovery import find_task

FAILURE_KINDS = (
    "compile",
    "correctness",
    "generalization",
    "timeout",
    "integrity",
    "infrastructure",
    "other",
)
_BY_STAGE = {"compile": "compile", "correctness": "correctness", "generalization": "generalization"}


def failure_kind(row: Row) -> str | None:
    """None for a row that has not failed (passed, running, queued, cancelled)."""
    if row.marked_infrastructure:
        return "infrastructure"
    result = row.result
    if result is None:
        if row.state == "failed":  # no result: faults past their retries, or the runner raised
            return "infrastructure"
        return None
    if result.passed:
        return None
    if result.integrity_flags:
        return "integrity"
    if result.status == "infrastructure_error":
        return "infrastructure"
    if any(s.status == "timeout" for s in result.stages):
        return "timeout"
    return _BY_STAGE.get(result.failed_stage or "", "other")


def grouped(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {k: [] for k in FAILURE_KINDS}
    for row in rows:
        kind = failure_kind(row)
        if kind is not None:
            out[kind].append(row)
    return {k: v for k, v in out.items() if v}


def error_text(row: Row) -> str:
    """The first failed stage's message and the tail of its log, or the row's own error."""
    parts: list[str] = []
    if row.result is not None:
        failed = next((s for s in row.result.stages if s.status not in ("passed", "skipped")), None)
        if failed is not None:
            parts.append(
                f"{failed.name}: {failed.status}"
                + (f" — {failed.message}" if failed.message else "")
            )
            if failed.log.strip():
                parts.append("\n".join(failed.log.strip().splitlines()[-30:]))
        parts += [f"integrity: {f}" for f in row.result.integrity_flags]
    if row.error:
        parts.append(row.error)
    return "\n".join(parts) or "(no error recorded)"


def starter_path(row: Row, tasks_dir: Path | None) -> Path | None:
    try:
        return find_task(row.task, tasks_dir).file("starter.py")
    except Exception:  # noqa: BLE001 - a task that moved or was renamed since the run
        return None


def candidate_diff(row: Row, tasks_dir: Path | None) -> str:
    """A unified diff of the candidate against the task's starter (what the agent changed)."""
    starter = starter_path(row, tasks_dir)
    if not row.candidate or not Path(row.candidate).is_file():
        return "(the candidate file is gone)"
    if starter is None or not starter.is_file():
        return "(the task's starter is not found)"
    diff = difflib.unified_diff(
        starter.read_text().splitlines(),
        Path(row.candidate).read_text().splitlines(),
        "starter.py",
        Path(row.candidate).name,
        lineterm="",
    )
    return "\n".join(diff) or "(the candidate is the starter, unchanged)"
