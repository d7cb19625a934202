"""Honest, autotuned over four block sizes: a GPU times each config and keeps the fastest; the
sim counts each trial, predicts it, keeps the one predicted fastest and bills only the launch
made with it (sim_count.Counting.judge_trial), never the trials."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}) for b in (32, 128, 256, 1024)], key=["I"], warmup=5, rep=20
)
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
    _silu_mul[lambda meta: (T, triton.cdiv(inter, meta["BLOCK"]))](x, out, inter)
    return out
