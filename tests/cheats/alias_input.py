"""Exploit: write the result into an input and return that input (no allocation, and the
harness's own buffer is what it checks).

Defense: an output may not share memory with an input unless the task declares it in place."""

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return b.add_(x, alpha=2)
