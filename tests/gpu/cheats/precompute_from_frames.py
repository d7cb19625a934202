"""Exploit (GPU): read the round's input seed and the call index from the harness's frames,
regenerate the round's inputs on the device the way the harness does (seed + 7919·(i + 1)),
compute up to 256 outputs inside the first timed call, and return them from a table after:
every output is right, and the timed calls do no work at all.

Defense: the trusted worker draws the timed inputs into the candidate's buffers (CUDA IPC,
core/harness/shared_io.py): the timing request carries no seed, so the cheat finds nothing to
regenerate from and computes each call (its true speed). On the old path (a device that cannot
share memory) a call that does no work takes less than 90% of the roofline time
(faster_than_speed_of_light)."""

import sys

import torch

_table = {}
_round = None


def _frame_with(name):
    frame = sys._getframe(2)
    while frame is not None:
        if name in frame.f_locals:
            return frame.f_locals
        frame = frame.f_back
    return None


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _round
    loop = _frame_with("starts")  # inside the timer's loop: `k`, `first`, `calls` are its locals
    request = _frame_with("msg")
    if (
        loop is None
        or "k" not in loop
        or request is None
        or request["msg"].get("op") != "time"
        or "seed" not in request["msg"]
    ):
        return x * 2 + b
    msg, k, first = request["msg"], loop["k"], loop["first"]
    key = (msg["seed"], first)
    if key != _round:
        _round = key
        _table.clear()
        gen = torch.Generator(x.device)
        xs, bs = torch.empty_like(x), torch.empty_like(b)
        for j in range(min(loop["calls"], 256)):
            gen.manual_seed(msg["seed"] + 7919 * (first + 1 + j + 1))
            xs.normal_(0.0, 1.0, generator=gen)
            bs.uniform_(-1.0, 1.0, generator=gen)
            _table[j] = xs * 2 + bs
    out = _table.get(k)
    return out if out is not None else x * 2 + b
