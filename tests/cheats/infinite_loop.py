"""Exploit: never return (hang the device slot).

Defense: per-stage time limits; the worker's process group is killed at the limit (timeout)."""

import torch

_calls = 0


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _calls
    _calls += 1
    while _calls > 1:
        pass
    return x * 2 + b
