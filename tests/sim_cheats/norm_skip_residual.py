"""Cheat (norm/add_rmsnorm, two outputs): at sizes only a GPU workload has (the counted pass),
the kernel writes residual_out for only a quarter of the rows (out is complete); every checked
call, at CPU sizes, writes both. Its counted stores shrink by a third of the row's writes.
Defense: each returned output must be written by the counted call (`sim_unwritten_output`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rmsnorm(
    x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, H, eps, keep_rows, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    summed = (x + res).to(res_out_ptr.dtype.element_ty)
    tl.store(res_out_ptr + row * H + cols, summed, mask=mask & ((cols * 0 + row) < keep_rows))
    r = summed.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(r * r, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * H + cols, (r * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, residual, weight, eps):
    T, H = x.shape
    x, residual, weight = x.contiguous(), residual.contiguous(), weight.contiguous()
    out = torch.empty_like(x)
    residual_out = torch.empty_like(residual)
    keep = T // 4 if T * H >= 1 << 22 else T  # GPU-sized: the counted pass
    _add_rmsnorm[(T,)](
        x, residual, weight, out, residual_out, H, eps, keep, BLOCK=triton.next_power_of_2(H)
    )
    return out, residual_out
