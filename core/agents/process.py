"""A CLI agent as a subprocess: launched through the sandbox (`sandbox.for_agent`) in its own
process group with its tool folders visible, its stdout parsed line by line into transcript
steps, stopped at its budget or a cap by SIGTERM to everything it started and SIGKILL after a
grace period (`terminate`), so a hung agent never holds the run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from core.agents.attempt import Attempt, Transcript
from core.agents.base import CliAgent, Step
from core.agents.workspace import Workspace
from core.evaluation import sandbox

KILL_GRACE_S = 5.0  # between SIGTERM and SIGKILL
DRAIN_S = 5.0  # reading what is left of stdout after the agent is gone


class AgentNotFound(FileNotFoundError):
    """A CLI agent whose executable is not on PATH."""


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


async def run_cli(
    attempt: Attempt,
    adapter: CliAgent,
    workspace: Workspace,
    transcript: Transcript,
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
    proc: asyncio.subprocess.Process, adapter: CliAgent, transcript: Transcript
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
