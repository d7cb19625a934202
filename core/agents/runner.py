"""Run one attempt: workspace → check server → agent (with its budget and caps) → final
evaluation on every workload, hidden included → the store.

A CLI agent runs as a subprocess through the sandbox (`sandbox.for_agent`), in its own process
group, its stdin fed from its `Launch`, its stderr to `agent.log`; each stdout line goes
through the adapter's `parse`, and each step becomes a `TranscriptEvent` stamped with the
attempt id, the agent's name and an increasing `seq`. An in-process agent runs as a coroutine
with the same `emit`. Either is stopped at the time budget, or once its reported usage passes
the token or cost cap: SIGTERM to everything it started, SIGKILL after a grace period, so a
hung agent never holds the run. A Ctrl-C (the coroutine cancelled) stops it the same way and
records nothing but the stop.

Stop reasons: finished (it exited 0 by itself), budget, cost_cap, token_cap, crashed (it exited
otherwise, or raised), cancelled. The stop is then classified (core/model/outcome.py): an
agent that changed `solution.py` is scored as it left it, whatever the reason; one that never
got to work (a CLI not on PATH, a crash before acting, endpoint errors) ends `agent_error`, one
that ended without changing it `no_submission`, and neither is scored: the starter left in the
workspace is not the agent's work. An unchanged starter submitted on purpose is `starter`.

The attempt's nouns and its transcript are core.agents.attempt; the CLI subprocess (launch,
stdout, stop) is core.agents.process (their public names are importable here too).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from core.agents.attempt import (
    STOP_REASONS,
    AgentOutcome,
    Attempt,
    AttemptOutcome,
    Evaluate,
    OnTranscript,
    Transcript,
    Usage,
    attempt_key,
)
from core.agents.base import AgentConfig, CliAgent, InProcessAgent, Step
from core.agents.check_server import CheckError, CheckServer
from core.agents.process import AgentNotFound, descendants, run_cli, terminate
from core.agents.workspace import Workspace, make_workspace
from core.devices.ids import timing_kind_of
from core.evaluation.evaluator import BadCandidate, check_candidate
from core.model import events
from core.model.candidate import NATIVE_SOURCES
from core.model.outcome import Activity, Baseline, classify
from core.model.result import Result, unevaluated


async def run_attempt(
    attempt: Attempt,
    adapter: CliAgent | InProcessAgent,
    folder: Path,
    evaluate: Evaluate,
    on_transcript: OnTranscript | None = None,
    masked: tuple[Path, ...] = (),
) -> AttemptOutcome:
    """Make the workspace in `folder` (wiped first), serve `arena check`, run the agent, then
    evaluate the final `solution.py` on all workloads. `masked`: more folders the agent must
    not see (the run's evaluation root, extra task folders)."""
    workspace = make_workspace(
        folder,
        attempt.task,
        attempt.device,
        attempt.variant,
        attempt.agent.budget_s,
        attempt.agent.max_cost_usd,
        attempt.agent.max_tokens,
    )
    outcome = await run_agent(attempt, adapter, workspace, evaluate, on_transcript, masked)
    submission = snapshot(workspace, "final")
    result = (
        None if outcome.verdict.failed else await evaluate_submission(attempt, submission, evaluate)
    )
    return AttemptOutcome(attempt, outcome, submission, result)


async def run_agent(
    attempt: Attempt,
    adapter: CliAgent | InProcessAgent,
    workspace: Workspace,
    evaluate: Evaluate,
    on_transcript: OnTranscript | None = None,
    masked: tuple[Path, ...] = (),
) -> AgentOutcome:
    """The agent phase alone: serve checks, run the agent to its end or a limit."""
    stop_event = asyncio.Event()
    reason: list[str] = []

    def stop(why: str) -> None:
        if not reason:
            reason.append(why)
        stop_event.set()

    transcript = Transcript(attempt, on_transcript, stop)

    async def check_visible(candidate: Path, on_event: Callable[[events.Event], None]) -> Result:
        return await evaluate(candidate, True, on_event)

    server = CheckServer(workspace.socket, workspace.submissions, check_visible)
    before = Baseline.of(workspace.path, NATIVE_SOURCES)
    started = time.monotonic()
    exit_status: int | None = None
    status: str | None = None
    error: str | None = None
    async with server:
        try:
            if isinstance(adapter, CliAgent):
                exit_status, status = await run_cli(
                    attempt, adapter, workspace, transcript, stop_event, stop, masked
                )
            else:
                exit_status = await _run_in_process(
                    attempt, adapter, workspace, server, transcript, stop_event, stop
                )
        except asyncio.CancelledError:
            reason[:0] = ["cancelled"]
            raise
        except Exception as exc:  # noqa: BLE001 - a broken adapter or launch: the attempt crashed, the run goes on
            error = str(exc) if isinstance(exc, AgentNotFound) else f"{type(exc).__name__}: {exc}"
            transcript.emit(Step("error", text=f"the agent could not run: {error}", is_error=True))
            stop("crashed")
    seconds = time.monotonic() - started
    if not reason:
        stop("finished" if exit_status == 0 else "crashed")
    why = reason[0]
    activity = transcript.activity()  # the agent's own steps, before the arena's notices below
    if why in ("budget", "cost_cap", "token_cap"):
        transcript.emit(
            Step("error", text=_stop_text(why, attempt.agent, transcript.usage), is_error=True)
        )
    elif why == "crashed" and exit_status not in (None, 0):
        tail = (
            workspace.log.read_text(errors="replace")[-1500:].strip()
            if workspace.log.is_file()
            else ""
        )
        crash = f"the agent exited with status {exit_status}" + (
            f"; its stderr ends:\n{tail}" if tail else ""
        )
        activity = Activity(activity.actions, (*activity.errors, crash))
        transcript.emit(Step("error", text=crash, is_error=True))
    verdict = classify(
        before=before,
        workspace=workspace.path,
        suffixes=NATIVE_SOURCES,
        stop_reason=why,
        exit_status=exit_status,
        checks=server.stats.checks,
        activity=activity,
        error=error,
    )
    if verdict.failed:
        transcript.emit(
            Step(
                "error",
                text=f"{verdict.outcome.value}: {verdict.reason}; not scored",
                is_error=True,
            )
        )
    return AgentOutcome(
        why, exit_status, seconds, transcript.usage, server.stats.checks, status, error, verdict
    )


def _stop_text(why: str, config: AgentConfig, usage: Usage) -> str:
    if why == "budget":
        return f"stopped by the arena: the time budget of {config.budget_s:g} s ran out"
    if why == "cost_cap":
        return f"stopped by the arena: reported cost ${usage.cost_usd or 0:.4f} passed the cap of ${config.max_cost_usd:g}"
    return f"stopped by the arena: {usage.tokens} tokens passed the cap of {config.max_tokens}"


async def _run_in_process(
    attempt: Attempt,
    adapter: InProcessAgent,
    workspace: Workspace,
    server: CheckServer,
    transcript: Transcript,
    stop_event: asyncio.Event,
    stop: Callable[[str], None],
) -> int | None:
    async def check() -> str:
        files = {
            p.name: p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(workspace.path.iterdir())
            if p.is_file() and (p.name == "solution.py" or p.suffix in NATIVE_SOURCES)
        }
        try:
            _, text = await server.check_files(files)
        except CheckError as exc:
            return f"error: {exc}"
        except Exception as exc:  # noqa: BLE001 - an infrastructure fault past its retries: the agent is told, and goes on
            return f"error: the arena could not run the check ({type(exc).__name__}: {exc}); try again later"
        return text

    task = asyncio.ensure_future(
        adapter.run(attempt.agent, workspace.path, workspace.prompt, transcript.emit, check)
    )
    stopper = asyncio.ensure_future(stop_event.wait())
    try:
        done, _ = await asyncio.wait(
            {task, stopper}, timeout=attempt.agent.budget_s, return_when=asyncio.FIRST_COMPLETED
        )
        if task not in done:
            if not done:  # else a cap already said why
                stop("budget")
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            return None
        exc = task.exception()
        if exc is not None:
            transcript.emit(
                Step("error", text=f"the agent raised {type(exc).__name__}: {exc}", is_error=True)
            )
            stop("crashed")
            return 1
        return 0
    finally:
        stopper.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def snapshot(workspace: Workspace, name: str) -> Path:
    """Copy solution.py (and sibling CUDA/HIP sources) out of the workspace: what is scored is
    what was there when the agent stopped. A missing solution.py snapshots as an empty file
    (it fails compile: the agent deleted its answer)."""
    folder = workspace.submissions / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for p in workspace.path.iterdir():
        if (
            p.is_file()
            and not p.is_symlink()
            and (p.name == "solution.py" or p.suffix in NATIVE_SOURCES)
        ):
            shutil.copyfile(p, folder / p.name)
    target = folder / "solution.py"
    if not target.exists():
        target.write_text("")
    return target


async def evaluate_submission(attempt: Attempt, submission: Path, evaluate: Evaluate) -> Result:
    """The final evaluation, all workloads. A file that cannot be a candidate at all (no `run`)
    is a compile failure scored zero, not an error of the run."""
    try:
        check_candidate(submission, attempt.task)
    except BadCandidate as exc:
        return unscorable(attempt.task.id, attempt.device, submission, str(exc))
    return await evaluate(submission, False, None)


def unscorable(task_id: str, device: str, submission: Path, message: str) -> Result:
    import hashlib

    sha = hashlib.sha256(submission.read_bytes()).hexdigest() if submission.is_file() else ""
    return unevaluated(task_id, {"id": device}, timing_kind_of(device).value, sha, message)


__all__ = [
    "STOP_REASONS",
    "AgentNotFound",
    "AgentOutcome",
    "Attempt",
    "AttemptOutcome",
    "Evaluate",
    "OnTranscript",
    "Usage",
    "attempt_key",
    "descendants",
    "evaluate_submission",
    "run_agent",
    "run_attempt",
    "snapshot",
    "terminate",
    "unscorable",
]
