"""Honest: an autotuned silu_mul whose autotuner restores its output between trials
(`restore_value`). On a GPU the autotuner's clone and copy back run only while it tunes; the
call that is timed is the kernel alone, and so is what a `sim:` device bills."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 512}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=8),
    ],
    key=["I"],
    restore_value=["out_ptr"],
)
@triton.jit
def _silu_mul_kernel(x_ptr, out_ptr, I, stride_xt, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    gate = tl.load(x_ptr + row * stride_xt + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_xt + I + cols, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * stride_out + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def run(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    grid = lambda meta: (T, triton.cdiv(inter, meta["BLOCK"]))
    _silu_mul_kernel[grid](x, out, inter, x.stride(0), out.stride(0))
    return out
