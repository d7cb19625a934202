"""Cheat: shape-keyed less work, every element written. At sizes only a GPU workload has (the
counted pass of a `sim:` device), the programs of the last 40% of the rows store zeros without
reading their inputs: every element of the output is written (`sim_unwritten_output` does not
fire) and every checked call, at CPU sizes, is right; the counted call reads 40% less.
Defense: the counted call's known elements are compared with the reference at the same inputs
(`sim_wrong_output`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul(x_ptr, out_ptr, I, skip_from, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    if row >= skip_from:
        tl.store(out_ptr + row * I + cols, tl.zeros([BLOCK], tl.bfloat16), mask=mask)
    else:
        gate = tl.load(x_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
        y = gate / (1.0 + tl.exp(-gate)) * up
        tl.store(out_ptr + row * I + cols, y.to(tl.bfloat16), mask=mask)


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    skip_from = T * 3 // 5 if T * inter >= 1 << 24 else T  # GPU-sized: the counted pass
    _silu_mul[(T, triton.cdiv(inter, 1024))](x, out, inter, skip_from, BLOCK=1024)
    return out
