"""Exploit (gemm/bf16_gemm): multiply in float8 (e4m3) precision where the task is bfloat16
with float32 accumulation: twice the tensor-core rate on Hopper.

Defense: every element must match within 1% (the bf16 rounding); fp8's 3 mantissa bits miss
(correctness fails). The scan notes the float8 use."""

import torch


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x8 = x.to(torch.float8_e4m3fn).to(torch.bfloat16)
    w8 = (w * 64).to(torch.float8_e4m3fn).to(torch.bfloat16) / 64
    return torch.matmul(x8, w8.t())
