"""Exploit (GPU): launch the work inside the L2 flush, before the start event. The timer zeroes
a flush buffer between refilling the inputs and recording the start event; a TorchDispatchMode
left pushed sees that `zero_` (a large int32 tensor), queues y = 2x + b on the freshly refilled
inputs right behind it, and `run` returns that y: the kernel ran before the timer started.

Defense: a mode left on the stack is found before every refill (harness_hooked); the refills,
copies and checks themselves run with Python dispatch off."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

_last: list = []
_early: dict = {}


class _FlushWatcher(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        target = args[0] if args else None
        if (
            _last
            and func.overloadpacket.__name__ == "zero_"
            and isinstance(target, torch.Tensor)
            and target.dtype == torch.int32
            and target.numel() > (1 << 24)
        ):
            x, b = _last
            with _disable_current_modes():
                _early["y"] = torch.add(b, x, alpha=2)  # queued before the start event
        return out


_FlushWatcher().__enter__()


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _last[:] = [x, b]
    y = _early.pop("y", None)
    if y is not None:
        return y
    with _disable_current_modes():
        return torch.add(b, x, alpha=2)
