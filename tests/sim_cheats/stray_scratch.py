"""Cheat (silu_mul): one store per program into a scratch tensor the kernel is not given (its
pointer reached by an offset from an argument's), which used to switch the value check off for
the whole launch ("a launch stored outside its tensor arguments"); with the check off, the rows
of every other program skip reading `up` when GPU-sized (the counted pass).
Defense: a store outside every argument is resolved against the tensors the call made (here the
scratch): it is a write of the scratch, nothing more, and the other stores stay known values:
`sim_wrong_output`. (An unresolvable one is `sim_stray_access`: stray_wild.)"""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul(x_ptr, out_ptr, I, scratch_offset, skip, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    tl.store(out_ptr + scratch_offset + row, row.to(tl.bfloat16))  # the stray store
    gate = tl.load(x_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
    if (skip != 0) & (row % 2 == 1):
        up = gate * 0.0 + 1.0
    else:
        up = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * I + cols, y.to(tl.bfloat16), mask=mask)


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    scratch = torch.empty((T,), device=x.device, dtype=x.dtype)
    offset = (scratch.data_ptr() - out.data_ptr()) // out.element_size()
    skip = int(T * inter >= 1 << 24)  # GPU-sized: the counted pass
    _silu_mul[(T, triton.cdiv(inter, 1024))](x, out, inter, offset, skip, BLOCK=1024)
    return out
