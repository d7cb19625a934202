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
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.agents.base import AgentConfig, CliAgent, InProcessAgent, Step
from core.agents.check_server import CheckError, CheckServer
from core.agents.workspace import Variant, Workspace, make_workspace
from core.devices.ids import timing_kind_of
from core.evaluation import sandbox
from core.evaluation.evaluator import BadCandidate, check_candidate
from core.model import events, keys
from core.model.candidate import NATIVE_SOURCES
from core.model.outcome import Activity, Baseline, Outcome, Verdict, classify
from core.model.result import Result, unevaluated
from core.model.task import Task

STOP_REASONS = ("finished", "budget", "cost_cap", "token_cap", "crashed", "cancelled")
KILL_GRACE_S = 5.0  # between SIGTERM and SIGKILL
DRAIN_S = 5.0  # reading what is left of stdout after the agent is gone

# (candidate file, visible only?, progress callback) -> Result, through the run's scheduler
Evaluate = Callable[[Path, bool, Callable[[events.Event], None] | None], Awaitable[Result]]
OnTranscript = Callable[[events.TranscriptEvent], None]


@dataclass(frozen=True)
class Attempt:
    """One attempt: run × agent × task × device × variant (× iteration)."""

    id: str  # `<run id>/<n>`
    run_id: str
    agent: AgentConfig
    task: Task
    device: str
    variant: Variant = field(default_factory=Variant)
    iteration: int = 0

    @property
    def key(self) -> str:
        """Stable across resumes: what the store finds the attempt by."""
        return attempt_key(
            self.agent.name, self.task.id, self.device, self.variant.name, self.iteration
        )

    @property
    def slug(self) -> str:
        """The attempt's folder name: short (the check socket's path lives under it)."""
        return (
            self.id.rsplit("/", 1)[-1]
            + "-"
            + "".join(
                c if c.isalnum() or c in "-_." else "_"
                for c in f"{self.agent.name}-{self.task.name}"
            )[:40]
        )


def attempt_key(agent: str, task_id: str, device: str, variant: str, iteration: int) -> str:
    return keys.attempt_key(agent, task_id, device, variant, iteration)


@dataclass
class Usage:
    """What the agent reported spending. Cumulative reports (running totals) and increments are
    kept apart, and the larger of the two counts: an agent that reports both per-turn usage and
    a session total is not counted twice."""

    cumulative: dict[str, float] = field(default_factory=dict)
    summed: dict[str, float] = field(default_factory=dict)

    def add(self, step: Step) -> None:
        for name in ("input_tokens", "output_tokens", "cost_usd"):
            value = getattr(step, name)
            if value is None:
                continue
            if step.cumulative:
                self.cumulative[name] = max(self.cumulative.get(name, 0.0), float(value))
            else:
                self.summed[name] = self.summed.get(name, 0.0) + float(value)

    def get(self, name: str) -> float | None:
        if name not in self.cumulative and name not in self.summed:
            return None
        return max(self.cumulative.get(name, 0.0), self.summed.get(name, 0.0))

    @property
    def tokens(self) -> int | None:
        parts = [self.get("input_tokens"), self.get("output_tokens")]
        return None if all(p is None for p in parts) else int(sum(p or 0 for p in parts))

    @property
    def cost_usd(self) -> float | None:
        return self.get("cost_usd")

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": _int(self.get("input_tokens")),
            "output_tokens": _int(self.get("output_tokens")),
            "cost_usd": self.cost_usd,
        }


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


@dataclass
class AgentOutcome:
    stop_reason: str
    exit_status: int | None
    seconds: float
    usage: Usage
    checks: int
    sandbox_status: str | None = None
    error: str | None = None
    verdict: Verdict = field(
        default_factory=lambda: Verdict(Outcome.SCORED)
    )  # did the agent produce something to score?

    @property
    def outcome(self) -> str:
        return self.verdict.outcome.value


@dataclass
class AttemptOutcome:
    attempt: Attempt
    agent: AgentOutcome
    submission: Path
    result: Result | None  # None: the agent produced nothing to score (agent_error, no_submission)


class _Transcript:
    """Stamps steps into events (attempt, agent, seq), counts usage, and asks for a stop at a cap."""

    def __init__(
        self, attempt: Attempt, on_event: OnTranscript | None, stop: Callable[[str], None]
    ):
        self.attempt, self.on_event, self.stop = attempt, on_event, stop
        self.seq = 0
        self.usage = Usage()
        self.actions = 0
        self.errors: list[str] = []

    def activity(self) -> Activity:
        return Activity(self.actions, tuple(self.errors))

    def emit(self, step: Step) -> None:
        self.seq += 1
        if step.kind == "tool_call":
            self.actions += 1
        elif step.kind == "error" and step.text:
            self.errors.append(step.text)
        event = events.TranscriptEvent(
            attempt=self.attempt.id, seq=self.seq, agent=self.attempt.agent.name, **step.__dict__
        )
        if self.on_event is not None:
            self.on_event(event)
        if step.kind == "usage":
            self.usage.add(step)
            config = self.attempt.agent
            if (
                config.max_cost_usd is not None
                and (self.usage.cost_usd or 0.0) > config.max_cost_usd
            ):
                self.stop("cost_cap")
            elif config.max_tokens is not None and (self.usage.tokens or 0) > config.max_tokens:
                self.stop("token_cap")


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

    transcript = _Transcript(attempt, on_transcript, stop)

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
                exit_status, status = await _run_cli(
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


class AgentNotFound(FileNotFoundError):
    """A CLI agent whose executable is not on PATH."""


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
    transcript: _Transcript,
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


def _tool_folders(argv0: str, path: str, policy: sandbox.SandboxPolicy) -> tuple[Path, ...]:
    """Folders to expose read-only so that the agent's executable runs inside: its folder and,
    for a link into a package (npm's bin/claude → lib/node_modules/...), the package's prefix,
    where the sandbox would hide them (a home folder, the host's /tmp)."""
    found = shutil.which(argv0, path=path)
    if found is None:
        return ()
    link, real = Path(found).absolute(), Path(os.path.realpath(found))
    folders = [link.parent, real.parent] + ([real.parent.parent.parent] if link != real else [])
    return tuple(dict.fromkeys(f for f in folders if policy.view(f) == "hidden"))


async def _run_cli(
    attempt: Attempt,
    adapter: CliAgent,
    workspace: Workspace,
    transcript: _Transcript,
    stop_event: asyncio.Event,
    stop: Callable[[str], None],
    masked: tuple[Path, ...],
) -> tuple[int | None, str]:
    config = attempt.agent
    launch = adapter.launch(config, workspace.path, workspace.prompt)
    if not launch.argv:
        raise ValueError(f"agent {config.name!r}: the adapter gave an empty command line")
    path = os.pathsep.join([str(workspace.bin), os.environ.get("PATH", os.defpath)])
    if (
        shutil.which(launch.argv[0], path=path) is None
    ):  # said plainly, not as bwrap's or exec's error
        raise AgentNotFound(
            f"the `{launch.argv[0]}` CLI of agent {config.name!r} is not on PATH: install it (docs/agents.md) or fix PATH"
        )
    env = {
        **launch.env,
        "PATH": path,
        "ARENA_CHECK_SOCKET": str(workspace.socket),
        "ARENA_ATTEMPT": attempt.id,
    }
    network = bool(config.options.get("network", True))
    base = sandbox.for_agent(
        workspace.path,
        env,
        network=network,
        home=workspace.home,
        read_only=(workspace.bin,),
        masked=masked,
    )
    policy = replace(base, read_only=(*base.read_only, *_tool_folders(launch.argv[0], path, base)))
    argv, proc_env, status = sandbox.wrap(list(launch.argv), policy)
    with open(workspace.log, "ab") as log:  # noqa: ASYNC230 - opening a local log file does not block
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env=proc_env,
            cwd=str(workspace.path),
            start_new_session=True,
            stdin=asyncio.subprocess.PIPE
            if launch.stdin is not None
            else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            limit=16 << 20,
        )
    try:
        if launch.stdin is not None:
            assert proc.stdin is not None
            with contextlib.suppress(ConnectionError):
                proc.stdin.write(launch.stdin)
                await proc.stdin.drain()
            proc.stdin.close()
        reader = asyncio.ensure_future(_read_steps(proc, adapter, transcript))
        waiter = asyncio.ensure_future(proc.wait())
        stopper = asyncio.ensure_future(stop_event.wait())
        try:
            done, _ = await asyncio.wait(
                {waiter, stopper}, timeout=config.budget_s, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                stop("budget")
            if waiter not in done:
                await terminate(proc)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    asyncio.shield(reader), DRAIN_S
                )  # the last lines, unless a leftover holds the pipe
        finally:
            for task in (reader, stopper):
                task.cancel()
        return proc.returncode, status
    except asyncio.CancelledError:
        await asyncio.shield(terminate(proc))
        raise
    finally:
        if proc.returncode is None:
            await terminate(proc)


async def _read_steps(
    proc: asyncio.subprocess.Process, adapter: CliAgent, transcript: _Transcript
) -> None:
    assert proc.stdout is not None
    while True:
        try:
            line = await proc.stdout.readline()
        except ValueError:  # a line past the stream's limit: skip it, keep reading
            continue
        if not line:
            return
        text = line.decode("utf-8", errors="replace")
        try:
            steps = adapter.parse(text)
        except Exception as exc:  # noqa: BLE001 - adapters must not raise; if one does, keep the line
            steps = [Step("text", text=text.strip(), raw=text.strip(), is_error=True)]
            steps.append(
                Step("error", text=f"the adapter could not parse a line: {exc}", is_error=True)
            )
        for step in steps:
            transcript.emit(step)


async def terminate(proc: asyncio.subprocess.Process, grace_s: float = KILL_GRACE_S) -> None:
    """Stop the agent and everything it started. Under bwrap the agent is a child of bwrap in
    another session, and bwrap does not forward signals: so SIGTERM goes to every descendant
    (the agent gets its chance to exit cleanly, and bwrap exits with it), then SIGKILL to the
    process group and every descendant left; killing bwrap tears its PID namespace down too."""
    if proc.returncode is not None:
        return
    pids = descendants(proc.pid)
    for pid in pids or [proc.pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    if not pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), grace_s)
    for pid in descendants(proc.pid) + pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


def descendants(root: int) -> list[int]:
    """Every live process below `root` (from /proc: a process that left the group with setsid
    is still a descendant until it is re-parented)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


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
