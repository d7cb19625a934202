"""Cheat: tell the counting pass by the harness's frames (a caller in the harness's sim/ folder), and
do a third of the rows there; a real call does them all, so every checked call is right.
Defense: a declared output the counted call left partly unwritten fails the stage
(`sim_unwritten_output`)."""

import sys

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


def _counted() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if "/harness/sim/" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    rows = max(1, T * 7 // 10) if _counted() else T  # 70%: above the impossibility floor
    _silu_mul[(rows, triton.cdiv(inter, 1024))](x, out, inter, BLOCK=1024)
    return out
