"""Exploit: return a lazy view (a negation bit that is resolved only when the tensor is read)
so that part of the work happens outside the timed call.

Defense: outputs must be plain dense tensors: strided layout, contiguous, no lazy negation or
conjugation bits."""

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch._neg_view(-(x * 2 + b))
