"""Cheat (silu_mul): one store per program into memory that is no tensor of the call (a buffer
made at import, reached by an offset from an argument's pointer), the trick that used to switch
the value check off for the whole launch.
Defense: an access outside every tensor the call was given or made fails the stage
(`sim_stray_access`)."""

import torch
import triton
import triton.language as tl

_HIDDEN = torch.zeros((1 << 16,), dtype=torch.bfloat16)  # made before the call: not the call's


@triton.jit
def _silu_mul(x_ptr, out_ptr, I, hidden_offset, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    tl.store(out_ptr + hidden_offset + row % 65536, row.to(tl.bfloat16))
    gate = tl.load(x_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(
        out_ptr + row * I + cols, (gate / (1.0 + tl.exp(-gate)) * up).to(tl.bfloat16), mask=mask
    )


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    offset = (_HIDDEN.data_ptr() - out.data_ptr()) // out.element_size()
    _silu_mul[(T, triton.cdiv(inter, 1024))](x, out, inter, offset, BLOCK=1024)
    return out
