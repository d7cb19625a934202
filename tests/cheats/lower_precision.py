"""Exploit: compute in float16 where the task is float32 (half the bytes, faster math).

Defense: the task's tolerance is set per dtype (1e-5 here): correctness fails."""

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (x.half() * 2 + b.half()).float()
