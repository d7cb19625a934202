"""Devices reached over SSH: the hosts file, one shared connection per host, and an executor
that uploads a job's bundle, runs the harness there and streams its events back.

`remotes.hosts` needs only PyYAML; everything that speaks SSH imports asyncssh, and is
loaded on first use of these names, so `import remotes` stays light.
"""

from __future__ import annotations

from typing import Any

from remotes.hosts import (
    Host,
    HostsError,
    NoHostsFile,
    default_hosts_path,
    find_host,
    load_hosts,
    parse_hosts,
)

_LAZY = {
    "RemoteExecutor": "executor",
    "remote_executor": "executor",
    "probe_device": "executor",
    "split_device_id": "executor",
    "HostConnection": "connection",
    "ConnectionPool": "pool",
    "RemoteError": "connection",
    "HostFacts": "connection",
    "DEFAULT_POOL": "pool",
    "check_hosts": "check",
    "HostReport": "check",
    "list_devices": "check",
    "alist_devices": "check",
}

__all__ = [
    "Host",
    "HostsError",
    "NoHostsFile",
    "default_hosts_path",
    "find_host",
    "load_hosts",
    "parse_hosts",
]
__all__ += list(_LAZY)  # the names __getattr__ imports


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'remotes' has no attribute {name!r}")
