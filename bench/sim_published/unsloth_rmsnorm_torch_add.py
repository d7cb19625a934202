"""After Unsloth's RMSNorm forward (unslothai/unsloth, unsloth/kernels/rms_layernorm.py,
`_rms_layernorm_forward`, Apache-2.0), used the way a model without a fused add calls it: the
residual add in torch (x + residual: one elementwise kernel that writes residual_out), then one
program per row over the whole row (the next power of two of H; Unsloth's calculate_settings
warps), the row in float32, rsqrt of the mean square, times the weight. Written here for the
task's signature; no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_row(s_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    s = tl.load(s_ptr + row * n_cols + cols, mask=keep, other=0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s * s, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=keep, other=0).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (s * rstd * w).to(out_ptr.dtype.element_ty), mask=keep)


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    rows, cols = x.shape
    res = x + residual  # bfloat16, computed in float32 and rounded once (torch's add)
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    _rms_row[(rows,)](res, weight, out, cols, eps, BLOCK=block, num_warps=warps)
    return out, res
