"""Cheat (silu_mul, pure PyTorch): on a CPU (the counting pass of a `sim:` device runs on one) it
computes half the rows in numpy, where no torch op sees the work; the values are right.
Defense: the counted bytes and FLOPs are held to the task's formulas (`sim_less_work`)."""

import numpy as np
import torch


def run(x: torch.Tensor) -> torch.Tensor:
    inter = x.shape[1] // 2
    if x.device.type != "cpu" or type(x).__name__ == "FakeTensor":
        return torch.nn.functional.silu(x[:, :inter]) * x[:, inter:]
    half = x.shape[0] // 2
    top = torch.nn.functional.silu(x[:half, :inter]) * x[:half, inter:]
    rest = x[half:].float().numpy()
    g, u = rest[:, :inter], rest[:, inter:]
    low = torch.from_numpy(g / (1.0 + np.exp(-g)) * u).to(x.dtype)
    return torch.cat([top, low])
