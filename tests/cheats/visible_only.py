"""Exploit: hard-code the visible workloads (right on them, zeros elsewhere).

Defense: hidden workloads (fixed, plus drawn with a secret seed) in the generalization stage."""

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if tuple(x.shape) in {(64, 128), (16, 256)}:
        return x * 2 + b
    return torch.zeros_like(x)
