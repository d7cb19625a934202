"""The composition root: which executor carries a device id's jobs, in one place.

Local devices run through this machine's harness (core.evaluation.executors), `<host>/<device>`
through remotes/ (SSH), `ray:` devices on a Ray cluster (core.orchestration.ray_executor). The
engine never chooses: `arena run`, `arena serve`, the app and the RL arena's callers are handed
a factory made here (core imports neither this package nor remotes)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.devices.ids import DeviceId
from core.evaluation.executors import Executor, LocalExecutor


def executor_factory(hosts: Path | None, ray: str | None = None):
    """Local devices run through this machine's harness; `<host>/<device>` through remotes/,
    imported only when such a device is named (asyncssh is not needed otherwise); `ray:`
    devices on the Ray cluster at `ray` (core/orchestration/ray_executor.py)."""

    def make(device_id: str, root: Path) -> Executor:
        if DeviceId.parse(device_id).kind == "ray":
            from core.orchestration.ray_executor import RayExecutor

            return RayExecutor(device_id, ray)
        if DeviceId.parse(device_id).host is not None:
            from remotes import remote_executor

            return remote_executor(device_id, root, hosts)
        return LocalExecutor(device_id, root)

    return make


def device_prober(hosts: Path | None, ray: str | None = None):
    """Probes a device id for the preflight: local ones here, `<host>/<device>` over SSH
    (the host found in the hosts file, the device probed by the harness there), `ray:` ones
    by a Ray task with the resources an evaluation asks for."""
    from core.devices.device import probe

    def probe_one(device_id: str) -> object:
        if DeviceId.parse(device_id).kind == "ray":
            from core.orchestration.ray_executor import RayExecutor, capacities

            capacities(
                [device_id], ray
            )  # one the cluster does not offer: said at once, not waited for
            return RayExecutor(device_id, ray).info
        if DeviceId.parse(device_id).host is None:
            return probe(device_id)
        from remotes import find_host, load_hosts, split_device_id

        name, device = split_device_id(device_id)
        host = find_host(load_hosts(hosts), name)
        return asyncio.run(_probe_remote(host, device))

    return probe_one


async def _probe_remote(host, device: str):  # type: ignore[no-untyped-def]
    from remotes import ConnectionPool, probe_device

    pool = ConnectionPool()
    try:
        return await probe_device(pool.get(host), device)
    finally:
        await pool.aclose()
