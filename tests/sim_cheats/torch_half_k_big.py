"""Cheat (bf16_gemm, pure PyTorch): above the real run's public budget (2·10¹⁰ FLOPs: such a call
used to be counted on fake tensors only, its values never seen) it multiplies over half of K.
Every checked call, at CPU sizes, and the real run of a small count are exact.
Defense: a call above the budget is held to the task's FLOP and byte formulas at the GPU
workload (`sim_less_work`), and its values are checked on a real run at a scaled workload."""

import torch


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    if 2 * M * N * K > 2e10:  # only counted on fake tensors, once
        half = K // 2
        return (x[:, :half] @ w[:, :half].T) * 2
    return x @ w.T
