"""Cheat (bf16_gemm, pure PyTorch): tells fake tensors (the counting pass) from real ones and
multiplies over half of K there; on real memory, at any size, it is exact. Above the real run's
budget the fake count is the one billed.
Defense: the billed count is held to the task's formulas (`sim_less_work`); the scaled real run
and a fake pass at the same scaled workload must agree (`sim_fake_pass_differs`)."""

import torch


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if type(x).__name__ == "FakeTensor":
        half = x.shape[1] // 2
        return (x[:, :half] @ w[:, :half].T) * 2
    return x @ w.T
