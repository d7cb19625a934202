"""Published-kernel bench set (bench/published/README.md): the residual add and RMSNorm forward
as Unsloth writes RMSNorm, as a candidate for tasks/norm/add_rmsnorm.

After unslothai/unsloth, unsloth/kernels/rms_layernorm.py, `_rms_layernorm_forward`
(Apache-2.0): one program per row, the row in one block, the variance in float32,
inv = rsqrt(var + eps), the normalised row cast to the weight's dtype before the product with
the weight. The residual sum comes first (stored in the input dtype, then normalised as
stored). Rewritten for this task's signature; no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rms_row(x_ptr, r_ptr, w_ptr, out_ptr, res_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    base = row * stride + cols
    summed = tl.load(x_ptr + base, mask=keep, other=0).to(tl.float32) + tl.load(
        r_ptr + base, mask=keep, other=0
    ).to(tl.float32)
    stored = summed.to(res_ptr.dtype.element_ty)
    tl.store(res_ptr + base, stored, mask=keep)
    X = stored.to(tl.float32)
    inv = tl.math.rsqrt(tl.sum(X * X, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=keep, other=0)
    normed = (X * inv).to(w.dtype)
    tl.store(out_ptr + base, normed * w, mask=keep)


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    x, residual = x.contiguous(), residual.contiguous()
    rows, cols = x.shape
    out = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    if rows:
        _add_rms_row[(rows,)](
            x,
            residual,
            weight,
            out,
            residual_out,
            x.stride(0),
            cols,
            eps,
            BLOCK=block,
            num_warps=warps,
        )
    return out, residual_out
