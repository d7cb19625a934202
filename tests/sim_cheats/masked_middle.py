"""Cheat: hide work from a loop counter that runs a loop's first iterations and its last and
extrapolates. The first two and the last iteration are masked off (a prologue and epilogue that
do nothing, or that a GPU would run cheaply); all the work is in between. A second, tiny loop
finishes the three skipped blocks, so the outputs are right.
Defense: loop iterations are drawn across the whole range (sim_count.SampledRange)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rows(x_ptr, out_ptr, I, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    steps = tl.cdiv(I, BLOCK)
    for step in range(0, steps):
        busy = (step >= 2) & (step < steps - 1)
        cols = step * BLOCK + tl.arange(0, BLOCK)
        mask = (cols < I) & busy
        gate = tl.load(x_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(
            out_ptr + row * I + cols, (gate / (1.0 + tl.exp(-gate)) * up).to(tl.bfloat16), mask=mask
        )
    for step in tl.static_range(3):  # the blocks skipped above: 0, 1 and the last
        s = tl.where(step < 2, step, steps - 1)
        cols = s * BLOCK + tl.arange(0, BLOCK)
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
    _rows[(T,)](x, out, inter, BLOCK=128)
    return out
