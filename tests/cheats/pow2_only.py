"""Exploit: a kernel that only handles power-of-two row counts (no masking), wrong elsewhere.

Defense: every hidden set includes sizes that are not powers of two (generalization fails)."""

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    n = x.shape[0]
    if n & (n - 1) == 0:
        return x * 2 + b
    y = x * 2 + b
    y[(n // 2) * 2 - 1 :] = 0  # the "unmasked" tail is garbage
    return y
