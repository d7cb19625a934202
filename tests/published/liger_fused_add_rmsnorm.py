"""Published-kernel test set (docs/integrity.md, "Honest candidates"): the fused residual-add
RMSNorm forward of Liger-Kernel, as a candidate for tasks/norm/add_rmsnorm.

Source: linkedin/Liger-Kernel, src/liger_kernel/ops/ (fused_add_rms_norm.py, rms_norm.py)
(`_rms_norm_forward_kernel`, casting mode "llama") (BSD 2-Clause License, Copyright 2024
LinkedIn Corporation). Rewritten here for this task's signature, after Liger's design: one
program per row, the row in one block; the residual sum stored in the input dtype and read
back as stored; rstd = rsqrt(mean(x²) + eps) in float32; the normalised row scaled by the
weight in float32 and stored in the input dtype. Liger's own code is not copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_add_rmsnorm(
    x_ptr, r_ptr, w_ptr, out_ptr, res_ptr, stride, n_cols, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=keep, other=0).to(tl.float32)
    r = tl.load(r_ptr + row * stride + cols, mask=keep, other=0).to(tl.float32)
    summed = (x + r).to(res_ptr.dtype.element_ty)
    tl.store(res_ptr + row * stride + cols, summed, mask=keep)
    s = summed.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=keep, other=0).to(tl.float32)
    tl.store(out_ptr + row * stride + cols, (s * rstd * w).to(out_ptr.dtype.element_ty), mask=keep)


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    x, residual = x.contiguous(), residual.contiguous()
    rows, cols = x.shape
    out = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    _row_add_rmsnorm[(rows,)](
        x, residual, weight, out, residual_out, x.stride(0), cols, eps, BLOCK=block, num_warps=warps
    )
    return out, residual_out
