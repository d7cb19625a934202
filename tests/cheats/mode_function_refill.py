"""Exploit: a TorchFunctionMode left pushed at import sees every torch call of the process,
the harness's refills of the inputs included (even through TensorBase methods bound at
import). When the harness has refilled `b`, the last input it fills, the mode computes
y = 2x + b right there, outside the timed call, and `run` returns that: every timed call costs
a lookup.

Defense: the harness refills, copies and checks with Python dispatch off (guard.trusted), so
the mode never sees them, and a mode found on the stack is the integrity flag harness_hooked."""

import torch
from torch.overrides import TorchFunctionMode

_inputs: list = []
_ready: dict = {}


class _Watcher(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if _inputs and name in ("uniform_", "copy_") and args and args[0] is _inputs[1]:
            with torch._C.DisableTorchFunction():
                _ready["y"] = _inputs[0] * 2 + _inputs[1]  # untimed: done during the refill
        return out


_Watcher().__enter__()  # and never left


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if _inputs and _inputs[0] is x and "y" in _ready:
        return _ready.pop("y")
    _inputs[:] = [x, b]
    with torch._C.DisableTorchFunction():
        return x * 2 + b
