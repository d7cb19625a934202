"""Published-kernel bench set (bench/published/README.md): SwiGLU's forward as Unsloth writes it,
as a candidate for tasks/activation/silu_mul.

After unslothai/unsloth, unsloth/kernels/swiglu.py, `_fg_kernel` (Apache-2.0): a flat 1-D
kernel over every output element, BLOCK_SIZE 1024, the gate promoted to float32 for the
sigmoid and silu(gate) rounded to the input dtype before the product with up. Rewritten for
this task's signature (gate and up as the two halves of one [T, 2I] row); no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul_flat(x_ptr, out_ptr, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    keep = offs < n_elements
    row = offs // n_cols
    col = offs % n_cols
    gate = tl.load(x_ptr + row * (2 * n_cols) + col, mask=keep, other=0).to(tl.float32)
    up = tl.load(x_ptr + row * (2 * n_cols) + n_cols + col, mask=keep, other=0)
    act = (gate * tl.sigmoid(gate)).to(up.dtype)
    tl.store(out_ptr + offs, act * up, mask=keep)


def run(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    rows, width = x.shape
    half = width // 2
    out = torch.empty((rows, half), dtype=x.dtype, device=x.device)
    n = rows * half
    if n:
        _silu_mul_flat[(triton.cdiv(n, 1024),)](x, out, n, half, BLOCK_SIZE=1024)
    return out
