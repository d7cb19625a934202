"""After the Triton tutorial's layer-norm forward (triton-lang/triton,
python/tutorials/05-layer-norm.py, MIT): one program per row that walks the row in chunks of
BLOCK columns, twice: the first pass accumulates the statistic (here the sum of squares of
x + residual, whose bfloat16 sum it stores), the second normalises. Written here as the task's
fused add + RMSNorm; no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rms_chunked(x_ptr, r_ptr, w_ptr, out_ptr, res_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        keep = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=keep, other=0).to(tl.float32)
        r = tl.load(r_ptr + row * n_cols + cols, mask=keep, other=0).to(tl.float32)
        s = (x + r).to(res_ptr.dtype.element_ty)
        tl.store(res_ptr + row * n_cols + cols, s, mask=keep)
        s32 = s.to(tl.float32)
        acc += s32 * s32
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        keep = cols < n_cols
        s = tl.load(res_ptr + row * n_cols + cols, mask=keep, other=0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=keep, other=0).to(tl.float32)
        tl.store(
            out_ptr + row * n_cols + cols, (s * rstd * w).to(out_ptr.dtype.element_ty), mask=keep
        )


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    rows, cols = x.shape
    out, res = torch.empty_like(x), torch.empty_like(x)
    # the tutorial's block: at most 64 KB per row chunk, here 1024 columns, 8 warps
    _add_rms_chunked[(rows,)](x, residual, weight, out, res, cols, eps, BLOCK=1024, num_warps=8)
    return out, res
