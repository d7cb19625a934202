"""Cheat: set a launch parameter the model trusts. num_stages=64 on a kernel with no loop, where
the latency term divides by the pipelining depth (small blocks: many waves of programs, where
latency binds).
Defense: launch parameters come from the compiled kernel, and pipelining counts only where a
loop has iterations to overlap, at most MAX_STAGES (sim_model.launch_time)."""

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


STAGES = 64


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    _silu_mul[(T, triton.cdiv(inter, 64))](x, out, inter, BLOCK=64, num_stages=STAGES)
    return out
