"""The CPU time a process tree has used: what `arena tasks validate` budgets, because it does
not grow with the machine's load the way wall time does (a loaded 2-core machine stretched
bundled tasks' evaluations from under 60 s to 77 s of wall time).

Linux only (/proc). A process's own time (`utime + stime`, every thread) plus the time of the
children it has waited for (`cutime + cstime`), summed over the live tree under a root: a worker
that exits is counted once it is reaped, in its parent's `cutime`. Elsewhere: None, and callers
fall back to wall time and say so.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, seconds of CPU of the process and its reaped children), None if it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after `pid (comm)`: comm may hold spaces
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime (fields 14-17)
    return int(fields[1]), ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds used so far by the process `root` and every process under it (None where /proc
    cannot tell: not Linux, or `root` is gone)."""
    if not (PROC / "self" / "stat").is_file():
        return None
    stats: dict[int, tuple[int, float]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (found := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = found
    if root not in stats:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo += children.get(pid, [])
    return total
