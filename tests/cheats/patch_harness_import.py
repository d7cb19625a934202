"""Exploit: a slow kernel that imports the harness's timing module and slows its clock.

Defense: the candidate's worker takes the harness out of sys.modules before importing the
candidate: `import core.harness.timing` builds a fresh copy that nothing uses, so the real
timer is untouched and measures the true (slow) time."""

import time

import torch

try:
    import core.harness.timing as timing

    _real = time.perf_counter
    timing._perf_counter = lambda: _real() / 1000
except ImportError:
    pass


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
    return x * 2 + b
