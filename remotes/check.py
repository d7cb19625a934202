"""Checking hosts and listing their devices: what `arena hosts check` and `arena devices` show.

Every host is asked in parallel; a host that fails gives one RemoteError saying why (auth,
host key unknown or changed, unreachable, no Python, no torch) and what to do about it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Sequence

from core.devices import DeviceInfo

from .connection import ConnectionPool, HostFacts, RemoteError
from .executor import probe_device
from .hosts import Host


@dataclass(frozen=True)
class HostReport:
    """One host's check: its facts, or the error that stopped it."""

    host: Host
    facts: HostFacts | None = None
    error: RemoteError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def insecure(self) -> bool:
        return self.host.insecure_no_host_check


async def check_host(host: Host, pool: ConnectionPool) -> HostReport:
    try:
        facts = await pool.get(host).ask_facts(names=True)
    except RemoteError as exc:
        return HostReport(host, error=exc)
    return HostReport(host, facts=facts)


async def check_hosts(hosts: Sequence[Host], pool: ConnectionPool | None = None) -> list[HostReport]:
    """Connect to every host in parallel and ask its Python, torch, Triton and devices."""
    own = pool is None
    pool = pool or ConnectionPool()
    try:
        return list(await asyncio.gather(*(check_host(h, pool) for h in hosts)))
    finally:
        if own:
            await pool.aclose()


async def alist_devices(hosts: Sequence[Host], pool: ConnectionPool | None = None) -> tuple[list[DeviceInfo], list[str]]:
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
        found = await asyncio.gather(*(probe_device(conn, d["id"]) for d in facts.devices), return_exceptions=True)
        return [r if isinstance(r, (DeviceInfo, RemoteError)) else RemoteError(host, "remote_error", f"{type(r).__name__}: {r}") for r in found]

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
