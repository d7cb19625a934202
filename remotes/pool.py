"""The `ConnectionPool`: one HostConnection per host and event loop, what is learned about a host
shared by all of them; `DEFAULT_POOL` is the process's."""

from __future__ import annotations

import asyncio

from remotes.channels import HostState
from remotes.connection import HostConnection
from remotes.hosts import Host


class ConnectionPool:
    """One HostConnection per host and event loop (a changed hosts entry gets a new one).
    What is learned about a host (its facts, its channel limit) is shared by all of them."""

    def __init__(self) -> None:
        self._conns: dict[tuple[str, int], HostConnection] = {}
        self._states: dict[Host, HostState] = {}

    def get(self, host: Host) -> HostConnection:
        """The connection to `host` for the running event loop."""
        loop = asyncio.get_running_loop()
        self._sweep()
        key = (host.name, id(loop))
        conn = self._conns.get(key)
        if conn is not None and (conn.host != host or conn.loop not in (None, loop)):
            conn.abandon()
            conn = None
        if conn is None:
            # Keyed by the whole entry: a changed entry learns its host again.
            conn = self._conns[key] = HostConnection(
                host, self._states.setdefault(host, HostState())
            )
        return conn

    def _sweep(self) -> None:
        """Forget the connections of event loops that have closed (each `asyncio.run`)."""
        for key, conn in list(self._conns.items()):
            if conn.loop is not None and conn.loop.is_closed():
                conn.abandon()
                del self._conns[key]

    async def aclose(self) -> None:
        """Close this loop's connections (others are dropped)."""
        loop = asyncio.get_running_loop()
        for key, conn in list(self._conns.items()):
            if conn.loop is loop:
                await conn.aclose()
            else:
                conn.abandon()
            del self._conns[key]

    def close(self) -> None:
        for conn in self._conns.values():
            conn.abandon()
        self._conns.clear()


DEFAULT_POOL = ConnectionPool()
