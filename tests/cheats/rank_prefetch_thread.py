"""Exploit (multi-rank): move the communication out of the timed call with a thread. The
timing loop refills a rank's input buffer, then waits at the barrier (a round trip through the
harness's parent) before the timer starts. A thread started at import watches the buffer, and
the moment new values appear it publishes them in a file its peers read: by the time the
barrier lets the ranks in, every peer's data is already there and the timed call only adds.
Checked calls see new buffers (the thread watches only the timed loop's), so they communicate
honestly and pass.

Defense: each rank's inputs are refilled after the barrier, right before its timer starts, so
anything a thread publishes of them lies inside the timed call; and (issue 37) a timed call
whose collective moves nothing over the process group fails the performance stage
(`collective_outside_timed_calls`: the files carry the data, the loopback carries nothing)."""

import os
import tempfile
import threading
import time

import torch
import torch.distributed as dist

_watch = {
    "x": None,
    "seen": None,
    "last": None,
    "out": None,
    "gen": 0,
    "calls": 0,
    "round": 0,
    "dir": None,
}


def _publish(rank, gen, x):
    path = os.path.join(_watch["dir"], f"r{rank}_{_watch['round']}_{gen}")
    with open(path + ".tmp", "wb") as f:
        f.write(x.numpy().tobytes())
    os.replace(path + ".tmp", path)


def _peer_sum(x, gen):
    rank, world = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    for peer in range(world):
        if peer == rank:
            continue
        path = os.path.join(_watch["dir"], f"r{peer}_{_watch['round']}_{gen}")
        deadline = time.monotonic() + 5
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.00002)
        with open(path, "rb") as f:
            out += torch.frombuffer(bytearray(f.read()), dtype=torch.float32).view_as(x)
    return out


def _poll():
    while True:
        x = _watch["x"]
        if x is not None and not torch.equal(x.view(-1)[:16], _watch["seen"]):
            time.sleep(0.0005)  # let the refill finish
            if x is _watch["x"]:
                _watch["seen"] = x.view(-1)[:16].clone()
                gen = _watch["gen"] + 1
                _publish(dist.get_rank(), gen, x)
                _watch["out"] = _peer_sum(x, gen)  # the whole all-reduce, before the timer starts
                _watch["gen"] = gen
        time.sleep(0.00005)


threading.Thread(target=_poll, daemon=True).start()


def run(x):
    rank = dist.get_rank()
    fresh_values = _watch["x"] is x and not torch.equal(x.view(-1)[:16], _watch["last"])
    _watch["last"] = x.view(-1)[:16].clone()
    if (
        fresh_values
    ):  # a timed call after the first, refilled: the thread has (nearly always) done the work
        _watch["calls"] += 1
        while _watch["gen"] < _watch["calls"]:
            time.sleep(0.00002)
        return _watch["out"]
    out = x.clone()
    dist.all_reduce(out)
    if _watch["dir"] is None:
        # A folder the ranks share: their evaluation's (each rank's /tmp is its own now).
        name = [tempfile.mkdtemp(prefix="arena-prefetch-", dir=os.getcwd()) if rank == 0 else None]
        dist.broadcast_object_list(name, src=0)
        _watch["dir"] = name[0]
    # A new buffer: watch it (its next refill is generation 1 of a new round)
    _watch["x"] = None
    _watch["round"] += 1
    _watch["seen"], _watch["gen"], _watch["calls"] = x.view(-1)[:16].clone(), 0, 0
    _watch["x"] = x
    return out
