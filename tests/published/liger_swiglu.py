"""Published-kernel test set (docs/integrity.md, "Honest candidates"): the SwiGLU forward of
Liger-Kernel, as a candidate for tasks/activation/silu_mul.

Source: linkedin/Liger-Kernel, src/liger_kernel/ops/swiglu.py, `_swiglu_forward_kernel`
(BSD 2-Clause License, Copyright 2024 LinkedIn Corporation). Rewritten here for this task's
signature (gate and up halves of one [T, 2I] tensor, as vLLM's silu_and_mul takes them), after
Liger's design: one program per row, the whole row in one block, the gate promoted to float32
for the sigmoid, silu(gate) * up stored in the input's dtype. Liger's own code is not copied;
its structure and numerics are what must stay unflagged."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_swiglu(x_ptr, out_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    gate = tl.load(x_ptr + row * in_stride + cols, mask=keep, other=0).to(tl.float32)
    up = tl.load(x_ptr + row * in_stride + n_cols + cols, mask=keep, other=0)
    tl.store(out_ptr + row * out_stride + cols, gate * tl.sigmoid(gate) * up, mask=keep)


def run(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    rows, width = x.shape
    half = width // 2
    out = torch.empty((rows, half), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(half)
    # Liger's calculate_settings: more warps for longer rows
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    _row_swiglu[(rows,)](x, out, x.stride(0), out.stride(0), half, BLOCK=block, num_warps=warps)
    return out
