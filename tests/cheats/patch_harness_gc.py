"""Exploit (an OPEN GAP, documented): find the live timing module through the garbage
collector and slow its clock, so a slow kernel (5 ms a call) reports a tiny time.

What catches it: nothing proven on the CPU device, where the timer runs in the candidate's own
process (CPU times are never ranked): only the scan's note (scan:introspection). The parent's
wall clock sees the time the timer did not, but the untimed_work note is kept to GPU timings,
CPU ones being too noisy for it. On a GPU the events time the device, and this clock is not
theirs."""

import gc
import time
import types

import torch

_real = time.perf_counter
_t0 = _real()
for obj in gc.get_objects():
    if (
        isinstance(obj, dict)
        and obj.get("__name__") == "core.harness.timing"
        and "_perf_counter" in obj
    ):
        obj["_perf_counter"] = lambda: _t0 + (_real() - _t0) / 1000
    elif isinstance(obj, types.ModuleType) and obj.__name__ == "core.harness.timing":
        obj._perf_counter = lambda: _t0 + (_real() - _t0) / 1000


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    end = _real() + 0.005
    while _real() < end:
        pass
    return x * 2 + b
