"""A Triton ReLU for KernelBench level 1 problem 19 (kernelbench/l1_019_relu), written for
bench/interop_gpu.py: one pass over the tensor, 4096 elements per program."""

import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def run(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    _relu[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
    return y
