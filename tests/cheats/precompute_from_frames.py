"""Exploit: read the round's input seed and the call index from the harness's frames,
regenerate the round's inputs the way the harness does (seed + 7919·(i + 1)), compute every
output of the round inside its first timed call, and return them from a table afterwards: one
slow call, the median near zero, every output right (so the sampled checks pass).

Before issue 23 this passed on the CPU device (only scan:introspection noted it). Defense now:
the trusted worker draws the timed inputs into shared memory (core/harness/shared_io.py); the
timing request in the candidate's process carries no seed, so there is nothing to regenerate
from and the cheat computes each call as it comes (its true speed). Where the old path is kept
(`Timing(shared_io=False)`) it still works, which tests/test_shared_io.py shows."""

import sys

import torch

_table = {}
_loop = None  # the timer's frame of the current round


def _request(frame):
    while frame is not None:
        msg = frame.f_locals.get("msg")
        if isinstance(msg, dict) and msg.get("op") == "time":
            return msg
        frame = frame.f_back
    return None


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _loop
    caller = sys._getframe(1)  # the timer's loop calls run() directly
    if caller is not _loop:  # a new round (or not a timed call at all)
        names = caller.f_locals
        msg = _request(caller)
        if "chosen" not in names or msg is None or "seed" not in msg:
            return x * 2 + b
        _loop = caller
        _table.clear()
        gen = torch.Generator()
        xs, bs = torch.empty_like(x), torch.empty_like(b)
        first = names["first"]
        for j in range(msg["max_calls"]):  # the whole round, inside its first timed call
            gen.manual_seed(msg["seed"] + 7919 * (first + 1 + j + 1))
            xs.normal_(0.0, 1.0, generator=gen)
            bs.uniform_(-1.0, 1.0, generator=gen)
            _table[j] = xs * 2 + bs
    out = _table.get(caller.f_locals["k"])
    return out if out is not None else x * 2 + b
