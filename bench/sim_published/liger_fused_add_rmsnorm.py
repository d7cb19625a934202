"""After Liger-Kernel's fused add + RMSNorm forward (linkedin/Liger-Kernel,
src/liger_kernel/ops/fused_add_rms_norm.py, BSD 2-Clause): one program per row, the whole row
in one block (the next power of two of H), warps by Liger's calculate_settings; the sum
x + residual is stored (bfloat16) and normalised in float32 with the weight ("gemma"-style
casting: everything in float32, rounded once). Written here for the task's signature; no code
copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rms_row(x_ptr, r_ptr, w_ptr, out_ptr, res_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=keep, other=0).to(tl.float32)
    r = tl.load(r_ptr + row * n_cols + cols, mask=keep, other=0).to(tl.float32)
    s = (x + r).to(res_ptr.dtype.element_ty)
    tl.store(res_ptr + row * n_cols + cols, s, mask=keep)
    s32 = s.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s32 * s32, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=keep, other=0).to(tl.float32)
    tl.store(
        out_ptr + row * n_cols + cols, (s32 * rstd * w).to(out_ptr.dtype.element_ty), mask=keep
    )


def _warps(block: int) -> int:
    return 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    rows, cols = x.shape
    out, res = torch.empty_like(x), torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _add_rms_row[(rows,)](
        x, residual, weight, out, res, cols, eps, BLOCK=block, num_warps=_warps(block)
    )
    return out, res
