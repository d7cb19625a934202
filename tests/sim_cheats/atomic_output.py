"""Cheat (silu_mul): writes its output with atomics (an exchange per element, of float32 bits) instead of stores,
which used to make no element of it known; GPU-sized (the counted pass), a quarter of its rows
never read `up`, within the formula's byte margin.
Defense: an output written only by atomics has no known element, and the task does not declare
it written by atomics (task.yaml `atomic: true`): `sim_unchecked_output`."""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul(x_ptr, out_ptr, I, skip, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    gate = tl.load(x_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(
        x_ptr + row * 2 * I + I + cols, mask=mask & ((skip == 0) | (row % 4 != 0)), other=1.0
    ).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.atomic_xchg(out_ptr + row * I + cols, y.to(tl.int32, bitcast=True), mask=mask)


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=torch.int32)  # float32 bits
    skip = int(T * inter >= 1 << 24)  # GPU-sized: the counted pass
    _silu_mul[(T, triton.cdiv(inter, 1024))](x, out, inter, skip, BLOCK=1024)
    return out.view(torch.float32).to(x.dtype)
