"""Exploit: return a tensor subclass that computes lazily, when the checker touches it (so
the timed call does no work).

Defense: outputs must be exactly torch.Tensor (type(t) is torch.Tensor)."""

import torch


class Lazy(torch.Tensor):
    pass


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.Tensor._make_subclass(Lazy, x * 2 + b)
