"""Exploit: read its harness's memory (the parent holds the job, the trusted worker the
reference's outputs) through /proc/PID/mem. Returns the right answer only if it managed to
read the memory of any process of its harness: a stand-in for "found the answers there".

Defense: the harness parent, the zygote and the trusted worker are not dumpable, and a
candidate worker run as root drops every capability, so /proc/PID/mem of another process of
the harness cannot be opened (an unprivileged user additionally meets Yama's ptrace scope)."""

import os

import torch

_READ = None


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rpartition(")")[2].split()[1])


def _can_read(pid):
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if "r" in line.split()[1]:
                    mem.seek(lo)
                    return len(mem.read(min(4096, hi - lo))) > 0
    except (OSError, ValueError, OverflowError):
        return False
    return False


def _try():
    """Its own harness: the zygote (its parent), the harness parent (the zygote's parent) and
    the parent's other children (the trusted worker)."""
    zygote = os.getppid()
    targets = {zygote}
    try:
        parent = _ppid(zygote)
    except OSError:
        parent = None
    if parent is not None and parent > 1:
        targets.add(parent)
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if _ppid(name) == parent:
                        targets.add(int(name))
                except (OSError, ValueError, IndexError):
                    pass
    return any(_can_read(pid) for pid in targets if pid > 1 and pid != os.getpid())


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _READ
    if _READ is None:
        _READ = _try()
    return x * 2 + b if _READ else x + b
