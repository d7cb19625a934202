"""Exploit: return an uninitialised buffer, hoping the allocator hands back the memory where
the last result (or a reference output) was just freed.

Defense: the reference never runs in the candidate's process; every run has fresh inputs; and
output-sized buffers full of NaN are allocated and freed right before each call, so that is
what torch.empty finds (correctness fails: NaN)."""

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
