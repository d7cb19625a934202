"""What an attempt's agent phase amounts to, before anything is scored: did the agent work on
the task at all?

An attempt is scored only where the agent produced something. The outcomes:

- `scored`: the agent changed solution.py (or a sibling CUDA/HIP source); its final
  evaluation is the agent's result, whatever the stop reason;
- `starter`: solution.py is the unchanged starter, but the agent submitted it on purpose (it
  wrote the file or ran `arena check` on it, and ended by itself without an error): scored,
  and labelled `starter` in every view, so that nobody takes the starter's score for the agent's work;
- `agent_error`: solution.py is unchanged and the agent failed: its CLI is missing or did
  not start, it crashed (before acting, or later without changing anything), or it reported
  errors such as its endpoint's (connection refused, a refused key). Not scored;
- `no_submission`: the agent ran and ended without changing solution.py (and did not submit
  the starter on purpose). Not scored.

`agent_error` and `no_submission` are never entered on the leaderboard as the agent's result
and never count as correct (docs/leaderboard.md: the failure rule); the leaderboard counts them
in a column of their own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class Outcome(str, Enum):
    SCORED = "scored"
    STARTER = "starter"
    AGENT_ERROR = "agent_error"
    NO_SUBMISSION = "no_submission"


FAILURES = (Outcome.AGENT_ERROR.value, Outcome.NO_SUBMISSION.value)  # never scored, never correct
MAX_REASON = 500  # characters of the reason kept (the transcript has the rest)


@dataclass(frozen=True)
class Baseline:
    """solution.py (and its siblings) as the workspace handed them to the agent."""

    digest: str
    mtime_ns: int | None  # None: no solution.py at all

    @classmethod
    def of(cls, workspace: Path, suffixes: tuple[str, ...]) -> Baseline:
        return cls(_digest(workspace, suffixes), _mtime(workspace / "solution.py"))


@dataclass(frozen=True)
class Activity:
    """What the transcript showed of the agent's work."""

    actions: int = 0  # tool calls (file edits, shell commands, `arena check`)
    errors: tuple[str, ...] = ()  # texts of error steps (endpoint errors, a missing CLI, a crash)


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: str | None = None

    @property
    def failed(self) -> bool:
        return self.outcome.value in FAILURES


def classify(
    *,
    before: Baseline,
    workspace: Path,
    suffixes: tuple[str, ...],
    stop_reason: str,
    exit_status: int | None,
    checks: int,
    activity: Activity,
    error: str | None = None,
) -> Verdict:
    """The outcome of an agent phase that has ended. `suffixes`: the native sources that are
    part of a submission beside solution.py; `before`: the submission when the agent started;
    `activity`: the agent's own steps (not the arena's stop notices)."""
    if _digest(workspace, suffixes) != before.digest:
        return Verdict(Outcome.SCORED)
    touched = _mtime(workspace / "solution.py") != before.mtime_ns
    acted = activity.actions > 0 or checks > 0 or touched
    failure = (
        error
        or _first_error(activity)
        or (None if stop_reason != "crashed" else _exit_text(exit_status, acted))
    )
    if failure:
        return Verdict(
            Outcome.AGENT_ERROR, _cut(failure if not acted else f"solution.py unchanged; {failure}")
        )
    if (touched or checks > 0) and stop_reason == "finished":
        return Verdict(Outcome.STARTER, "the agent submitted the unchanged starter")
    why = {
        "budget": "the time budget ran out",
        "cost_cap": "the cost cap stopped it",
        "token_cap": "the token cap stopped it",
    }.get(stop_reason, "the agent ended")
    return Verdict(Outcome.NO_SUBMISSION, f"solution.py is unchanged: {why} without a change to it")


def _first_error(activity: Activity) -> str | None:
    return activity.errors[0] if activity.errors else None


def _exit_text(exit_status: int | None, acted: bool) -> str:
    when = "" if acted else " before acting"
    return (
        f"the agent crashed{when}"
        if exit_status in (None, 0)
        else f"the agent exited with status {exit_status}{when}"
    )


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def _digest(workspace: Path, suffixes: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for p in sorted(workspace.iterdir()) if workspace.is_dir() else []:
        if p.is_file() and not p.is_symlink() and (p.name == "solution.py" or p.suffix in suffixes):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
