"""Exploit: outputs filled only when read. `run` returns an empty tensor at once; a
TorchDispatchMode left pushed sees the harness read it (the copy of a sampled timed call, the
packing of a correctness run) and computes it just before. Calls whose outputs nobody reads
never do any work.

Defense: the harness reads outputs with Python dispatch off (guard.trusted): it sees the empty
tensor; and a mode found on the stack is the integrity flag harness_hooked."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_pending: dict = {}


class _OnRead(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, torch.Tensor) and id(a) in _pending:
                x, b = _pending.pop(id(a))
                with torch.utils._python_dispatch._disable_current_modes():
                    torch.add(b, x, alpha=2, out=a)  # filled when read
        return func(*args, **(kwargs or {}))


_OnRead().__enter__()


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with torch.utils._python_dispatch._disable_current_modes():
        y = torch.empty_like(x)
    _pending[id(y)] = (x, b)
    return y
