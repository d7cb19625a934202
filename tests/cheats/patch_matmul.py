"""Exploit (gemm/bf16_gemm): replace torch.matmul globally with a slow version, so that the
baseline (torch.matmul) looks slow, and use the saved original itself.

Defense: the baseline is timed in its own process, which never imports the candidate; the
speedup stays about 1. The runtime patch is noted."""

import time

import torch

_matmul = torch.matmul


def _slow(*args, **kwargs):
    time.sleep(0.05)
    return _matmul(*args, **kwargs)


torch.matmul = _slow
torch.Tensor.__matmul__ = lambda a, b: _slow(a, b)


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return _matmul(x, w.t())
