"""One SSH connection per host, reused by every job on that host (asyncssh).

Host keys are verified against known_hosts unless the entry says `insecure_no_host_check:
true`, which is warned about on every connect and recorded (`HostConnection.insecure`). Jobs
open channels (sessions) on the shared connection through a limiter kept below the server's
MaxSessions: `max_channels` (8 by default, for OpenSSH's default of 10), shrunk to what the
server really accepts the first time it refuses a channel. A lost connection is noticed
(keepalives, or the socket closing) and the next job reconnects.

Connections belong to an event loop; a HostConnection used from a new loop (each
`asyncio.run`) drops the old loop's connection and opens a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncssh

from core.evaluation.executors import HarnessError
from remotes.channels import ChannelLimiter, HostState
from remotes.facts import FACTS_SCRIPT, HostFacts, sh, shell_word_python
from remotes.hosts import Host

log = logging.getLogger("remotes")

CHANNEL_RETRY_S = 30.0  # how long a job waits for the server to accept a channel
# What a lost connection raises, on whichever side of a channel notices it first.
LOST = (asyncssh.DisconnectError, asyncssh.ConnectionLost, BrokenPipeError, ConnectionError)


class RemoteError(HarnessError):
    """A host that could not be reached or used. `kind` is one of: unreachable, auth_failed,
    host_key_unknown, host_key_changed, ssh_error, lost, no_python, no_torch, remote_error.
    An infrastructure fault (a HarnessError): never the candidate's doing."""

    def __init__(self, host: Host, kind: str, message: str):
        self.host, self.kind = host, kind
        super().__init__(f"{host.name} ({host.address}): {message}")


def insecure_warning(host: Host) -> str:
    return (
        f"HOST KEY CHECK DISABLED for {host.name} ({host.address}): `insecure_no_host_check: true` in the hosts file. "
        "Anyone who can intercept this connection can impersonate the host, read the candidates sent to it and forge "
        "their results; results from this host are marked. Record its key with ssh-keyscan and remove the flag."
    )


class _Client(asyncssh.SSHClient):
    def __init__(self, owner: HostConnection):
        self.owner = owner
        self.conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._lost(self.conn, exc)


class HostConnection:
    """The one connection to one host in one event loop, opened on first use and reopened
    after a loss. Get it from a ConnectionPool, which keeps one per host and loop."""

    def __init__(self, host: Host, state: HostState | None = None):
        self.host = host
        self.state = state or HostState()
        self.connects = 0
        self.insecure_connects = 0
        self.last_loss: str | None = None
        self._conn: asyncssh.SSHClientConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._facts_lock: asyncio.Lock | None = None
        self._limiter: ChannelLimiter | None = None

    @property
    def insecure(self) -> bool:
        return self.host.insecure_no_host_check

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    @property
    def limiter(self) -> ChannelLimiter:
        self._bind()
        assert self._limiter is not None
        return self._limiter

    def _bind(self) -> None:
        """The first use binds this connection to the running loop; asyncssh connections,
        locks and conditions cannot move between loops."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None:
            raise RuntimeError(
                f"{self.host.name}: a HostConnection belongs to one event loop; get one from the pool in each loop"
            )
        self._loop = loop
        self._lock = asyncio.Lock()
        self._facts_lock = asyncio.Lock()
        self._limiter = ChannelLimiter(
            self.state.channel_limit or self.host.max_channels, self.state
        )

    def abandon(self) -> None:
        """Drop the connection from outside its loop: abort it on that loop if the loop still
        runs, else end its TCP stream (a finished `asyncio.run` cannot close it any more; the
        descriptor itself is freed with the transport)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        loop = self._loop
        if loop is not None and loop.is_running():
            if loop is _running_loop():
                conn.abort()
            else:
                loop.call_soon_threadsafe(conn.abort)
            return
        sock = conn.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _lost(self, conn: asyncssh.SSHClientConnection | None, exc: Exception | None) -> None:
        if conn is not None and conn is self._conn:
            self._conn = None
            if exc is not None:
                self.last_loss = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "%s: connection lost (%s); the next job reconnects",
                    self.host.name,
                    self.last_loss,
                )

    async def connect(self) -> asyncssh.SSHClientConnection:
        """The open connection, opening (or reopening) it when needed."""
        self._bind()
        assert self._lock is not None
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            self._conn = await self._open()
            return self._conn

    async def _open(self) -> asyncssh.SSHClientConnection:
        host = self.host
        options: dict[str, Any] = {
            "username": host.user or (),
            "connect_timeout": host.connect_timeout,
            "login_timeout": max(host.connect_timeout, 10.0),
            "keepalive_interval": host.keepalive_interval,
            "keepalive_count_max": host.keepalive_count_max,
        }
        if host.key is not None:
            options["client_keys"] = [str(host.key)]
            options["agent_path"] = None
        if host.insecure_no_host_check:
            log.warning(insecure_warning(host))
            self.insecure_connects += 1
            options["known_hosts"] = None
        else:
            # A missing known_hosts file trusts nothing (rather than failing to read it).
            options["known_hosts"] = (
                str(host.known_hosts) if host.known_hosts.is_file() else ([], [], [])
            )
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    host.host, host.port, client_factory=lambda: _Client(self), **options
                ),
                host.connect_timeout + 5,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise self._host_key_error(exc) from None
        except asyncssh.PermissionDenied:
            key = str(host.key) if host.key else "ssh-agent and ~/.ssh/id_*"
            raise RemoteError(
                host,
                "auth_failed",
                (
                    f"authentication failed as {host.user or 'the local user'} with {key}: add the public key to "
                    f"~/.ssh/authorized_keys on {host.host}, or set `user:`/`key:` in the hosts file"
                ),
            ) from None
        except (asyncio.TimeoutError, TimeoutError):
            raise RemoteError(
                host,
                "unreachable",
                f"no answer within {host.connect_timeout:g} s: check `host:`/`port:` and that sshd runs there",
            ) from None
        except OSError as exc:
            raise RemoteError(
                host,
                "unreachable",
                f"cannot connect ({exc.strerror or exc}): check `host:`/`port:` and that sshd runs there",
            ) from None
        except asyncssh.Error as exc:
            raise RemoteError(
                host, "ssh_error", f"SSH failed: {exc.reason if hasattr(exc, 'reason') else exc}"
            ) from None
        self.connects += 1
        return conn

    def _host_key_error(self, exc: Exception) -> RemoteError:
        host = self.host
        known = host.known_hosts
        scan = f"ssh-keyscan -p {host.port} {host.host} >> {known}"
        risk = "or, on a network you trust completely, set `insecure_no_host_check: true` (anyone in the path could then impersonate the host and forge results)"
        try:
            recorded = known.is_file() and bool(
                asyncssh.match_known_hosts(str(known), host.host, host.host, host.port)[0]
            )
        except (OSError, ValueError, asyncssh.Error):
            recorded = False
        if recorded:
            return RemoteError(
                host,
                "host_key_changed",
                (
                    f"the host key CHANGED since it was recorded in {known}: the host was reinstalled, or someone is intercepting "
                    f"the connection. If you know why it changed, remove the old key (`ssh-keygen -R '[{host.host}]:{host.port}' -f {known}` "
                    f"or `ssh-keygen -R {host.host} -f {known}`) and record the new one (`{scan}`)"
                ),
            )
        return RemoteError(
            host,
            "host_key_unknown",
            f"the host key is not in {known}: record it with `{scan}` and check its fingerprint, {risk}",
        )

    @contextlib.asynccontextmanager
    async def process(
        self, command: str, **kwargs: Any
    ) -> AsyncIterator[asyncssh.SSHClientProcess]:
        """A remote process on its own channel, holding one of the limiter's permits until the
        channel is closed. A server that refuses the channel while others are open is at its
        MaxSessions: the limiter shrinks to that, and this waits for a free channel."""
        conn = await self.connect()
        limiter = self.limiter
        await limiter.acquire()
        was_open = False
        try:
            deadline = asyncio.get_running_loop().time() + CHANNEL_RETRY_S
            refusals = 0
            while True:
                try:
                    proc = await conn.create_process(command, **kwargs)
                    break
                except asyncssh.ChannelOpenError as exc:
                    refusals += 1
                    if asyncio.get_running_loop().time() > deadline or (
                        limiter.open == 0 and refusals > 5
                    ):
                        raise RemoteError(
                            self.host,
                            "ssh_error",
                            f"the server refuses to open a session ({exc.reason}): check its MaxSessions and its log",
                        ) from None
                    await limiter.refused()
                    conn = await self.connect()
                except (asyncssh.DisconnectError, asyncssh.ConnectionLost, OSError) as exc:
                    raise self.lost(exc) from None
            await limiter.opened()
            was_open = True
            try:
                yield proc
            finally:
                proc.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait_closed(), 5)
        finally:
            await limiter.release(was_open)

    def lost(self, exc: BaseException | None = None) -> RemoteError:
        detail = f" ({type(exc).__name__}: {exc})" if exc is not None and str(exc) else ""
        return RemoteError(
            self.host,
            "lost",
            f"the SSH connection was lost{detail or (' (' + self.last_loss + ')' if self.last_loss else '')}",
        )

    async def run(
        self, command: str, input: bytes | None = None, timeout: float | None = None
    ) -> Completed:
        """Run a command to completion on its own channel; `input` (bytes) goes to its stdin."""
        async with self.process(command, encoding=None) as proc:
            try:
                if input is not None:
                    proc.stdin.write(input)
                proc.stdin.write_eof()
                result = await asyncio.wait_for(proc.wait(check=False), timeout)
            except asyncio.TimeoutError:
                raise RemoteError(
                    self.host, "remote_error", f"a command took more than {timeout:g} s"
                ) from None
            except LOST as exc:
                raise self.lost(exc) from None
        if result.exit_status is None and result.exit_signal is None:
            raise self.lost()  # the channel closed without the command's end: the connection went away
        return Completed(result.exit_status, _text(result.stdout), _text(result.stderr))

    async def facts(self) -> HostFacts:
        """The host's Python, torch and Triton versions, home and torch build (asked once,
        kept; no device list, so no torch import)."""
        self._bind()
        assert self._facts_lock is not None
        async with self._facts_lock:
            if self.state.facts is None:
                self.state.facts = await self.ask_facts()
        return self.state.facts

    async def ask_facts(self, devices: bool = False, names: bool = False) -> HostFacts:
        """Ask the host now; `devices` also lists its devices (importing torch there), `names`
        their models."""
        py = shell_word_python(self.host.python)
        args = "".join([" devices" if devices or names else "", " names" if names else ""])
        result = await self.run(sh(f"{py} -c {shlex.quote(FACTS_SCRIPT)}{args}"), timeout=120)
        line = next(
            (ln for ln in result.stdout.splitlines() if ln.startswith("ARENA-FACTS ")), None
        )
        if line is None:
            stderr = result.stderr.strip()
            if result.exit_status == 127 or "not found" in stderr:
                raise RemoteError(
                    self.host,
                    "no_python",
                    f"no Python at `{self.host.python}`: install python3 there or set `python:` to its path (e.g. ~/venv/bin/python)",
                )
            raise RemoteError(
                self.host,
                "remote_error",
                f"`{self.host.python}` failed (exit {result.exit_status}): {stderr[-500:] or 'no output'}",
            )
        data = json.loads(line.split(" ", 1)[1])
        facts = HostFacts(**{k: data.get(k) for k in HostFacts.__dataclass_fields__ if k in data})
        if facts.error:
            raise RemoteError(
                self.host,
                "no_torch",
                f"`{self.host.python}` (Python {facts.python}) cannot import torch ({facts.error}): install torch there, or point `python:` at a Python that has it",
            )
        return facts

    def disconnect(self) -> None:
        """Drop the connection now, as a network failure would (the next use reconnects)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self.last_loss = "disconnected by the client"
            conn.abort()

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 5)

    def close(self) -> None:
        """Close from synchronous code (inside the connection's loop, another, or none)."""
        self.abandon()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass(frozen=True)
class Completed:
    exit_status: int | None
    stdout: str
    stderr: str


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


__all__ = [
    "CHANNEL_RETRY_S",
    "LOST",
    "ChannelLimiter",
    "Completed",
    "HostConnection",
    "HostFacts",
    "HostState",
    "RemoteError",
    "insecure_warning",
    "sh",
    "shell_word_python",
]
