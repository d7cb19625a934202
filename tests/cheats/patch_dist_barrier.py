"""Exploit (multi-rank): move the collective out of the timed call. The timer made every rank
meet in torch.distributed.barrier before each timed call; barrier() looks up
`distributed_c10d._get_default_group` at call time, so replacing that function puts the
candidate's code inside the barrier, after the inputs were refilled and before the timer
starts. It all-gathers the fresh input there; `run` then only sums what it finds.

Defense: the ranks meet through the harness parent, over their own sockets, never through
torch.distributed; the rank's torch.distributed is watched, and the replacement is the
integrity flag torch_patched."""

import sys

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

_real = c10d._get_default_group
_last: list = []
_gathered: dict = {}


def _in_barrier() -> bool:
    frame = sys._getframe(2)
    return frame is not None and frame.f_code.co_name == "barrier"


def _default_group():
    group = _real()
    if _last and _in_barrier():
        x = _last[0]
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x)  # the communication, outside the timed call
        _gathered[id(x)] = torch.stack(parts).sum(0)
    return group


c10d._get_default_group = _default_group


def run(x):
    done = _gathered.pop(id(x), None)
    _last[:] = [x]
    if done is not None:
        return done
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    return torch.stack(parts).sum(0)
