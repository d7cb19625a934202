"""Cheat: tell the counting pass from a real run by the zero pages of a large input the counter
never wrote (only its first block of values was drawn). A weight whose last value is exactly
zero is taken for the counting pass, and the kernel does a sliver of its work there.
Defense: large inputs are filled with drawn values, within a memory budget per workload
(sim_predict.gpu_inputs)."""

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
    counting = x.numel() * x.element_size() > (64 << 20) and float(x.view(-1)[-1]) == 0.0
    rows = 1 if counting else T
    _silu_mul[(rows, triton.cdiv(inter, 1024))](x, out, inter, BLOCK=1024)
    return out
