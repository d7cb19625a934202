"""Exploit (multi-rank, issue 37): no collective in any call. The ranks pass their inputs through
files in the folder they share (their evaluation's), each waiting for its peers' file: the
values are right, and no byte crosses the process group, whose cost is the task.

Defense: on CPU ranks the parent reads the loopback interface's byte counter around every timed
call (the window from the barrier's `go` to the first rank out of the call): the candidate's
calls must move at least a quarter of what the baseline's collective moves
(`collective_outside_timed_calls`, core/harness/traffic.py)."""

import os
import time

import torch
import torch.distributed as dist

_calls = {"n": 0}


def run(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    n = _calls["n"]
    _calls["n"] += 1
    mine = f"xchg-{n}-{rank}.pt"
    torch.save(x, mine + ".tmp")
    os.replace(mine + ".tmp", mine)
    out = x.clone()
    for peer in range(world):
        if peer == rank:
            continue
        theirs = f"xchg-{n}-{peer}.pt"
        while not os.path.exists(theirs):
            time.sleep(0.0002)
        out += torch.load(theirs)
    return out
