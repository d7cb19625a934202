"""Which process owns something (a run in the store, a temporary folder), and whether that
process is still alive.

A process id alone is not an identity: after a crash the id is soon reused. An `Owner` adds
the host, the boot (Linux's boot id) and the process's start time since boot, so "alive" means
"this very process is still running", never "some process has that number". On another host
nothing can be checked from here: the caller judges such an owner by its heartbeat."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:  # not Linux: the start time alone has to do
        return ""


def _pid_namespace() -> str:
    """This process's PID namespace (its inode): two containers of one host may share a host
    name and a boot, but a process id means something only inside its own namespace."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22), or ""."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ")".
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    token: str  # "<boot id>:<start ticks>:<pid namespace>": this process, not only this number

    @classmethod
    def me(cls) -> Owner:
        return _me(os.getpid())

    @classmethod
    def of(cls, pid: int) -> Owner:
        """The process `pid` of this host as it runs now (tests: another live process)."""
        return cls(
            pid, socket.gethostname(), f"{_boot_id()}:{_start_ticks(pid)}:{_pid_namespace()}"
        )

    def alive(self) -> bool | None:
        """True when this very process still runs, False when it does not, None when that cannot
        be told from here (another host or PID namespace: judge by the heartbeat)."""
        boot, ticks, namespace = (self.token.split(":") + ["", ""])[:3]
        if self.host != socket.gethostname() or (namespace and namespace != _pid_namespace()):
            return None  # another host, or another container of this one: its ids are not ours
        if boot and boot != _boot_id():
            return False  # the host rebooted: every process of the old boot is gone
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # another user's process: it exists
        now = _start_ticks(self.pid)
        return not (ticks and now and now != ticks)  # the number was reused by a newer process

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


@lru_cache(maxsize=4)
def _me(pid: int) -> Owner:  # keyed by pid: a forked child is an owner of its own
    return Owner.of(pid)
