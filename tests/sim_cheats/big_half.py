"""Cheat: shape-keyed less work. At sizes only a GPU workload has (the counted pass of a `sim:`
device; correctness runs at CPU sizes), the kernel's grid covers the first half of the rows and
leaves the rest of the output unwritten: every checked call is right, the prediction halves.
Defense: the counted call's outputs must be written: a declared output that the counted kernels
and torch ops left partly unwritten fails the stage (`sim_unwritten_output`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul(x_ptr, out_ptr, I, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    gate = tl.load(x_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(
        out_ptr + row * I + cols, (gate / (1.0 + tl.exp(-gate)) * up).to(tl.bfloat16), mask=mask
    )


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    rows = T * 3 // 5 if T * inter >= 1 << 24 else T  # GPU-sized: the counted pass: 60% of the rows
    _silu_mul[(rows, triton.cdiv(inter, 1024))](x, out, inter, BLOCK=1024)
    return out
