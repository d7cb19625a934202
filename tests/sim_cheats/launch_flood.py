"""Cheat: exceed the launch cap. 255 empty launches first, then the real work split over many
launches, which a counter that keeps the first 256 launches never bills.
Defense: launches past the cap are billed, merged into one entry (sim_predict, sim_count.merged_summary)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _nothing(x_ptr):
    pass


@triton.jit
def _silu_mul(x_ptr, out_ptr, row0, I, BLOCK: tl.constexpr):
    row = row0 + tl.program_id(0).to(tl.int64)
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
    for _ in range(255):
        _nothing[(1,)](x)
    chunk = max(1, T // 32)
    for row0 in range(0, T, chunk):
        _silu_mul[(min(chunk, T - row0), triton.cdiv(inter, 1024))](x, out, row0, inter, BLOCK=1024)
    return out
