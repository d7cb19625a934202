"""Cheat (add_rmsnorm): one scalar `atomic_max` per program into a scratch argument, which used
to take every store of the launch out of the known set ("no known elements (... atomics ...)"),
and, GPU-sized (the counted pass), the residual of every other row is never read (its bytes
stay within the formula's margin): both outputs written, half their rows wrong.
Defense: only the addresses an atomic wrote leave the known set; the program's other stores are
still compared with the reference (`sim_wrong_output`); and atomics are billed."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rmsnorm(
    x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, flag_ptr, H, eps, skip, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    tl.atomic_max(flag_ptr, 1)
    x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    if (skip != 0) & (row % 2 == 1):
        res = x * 0.0
    else:
        res = tl.load(res_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    summed = (x + res).to(res_out_ptr.dtype.element_ty)
    tl.store(res_out_ptr + row * H + cols, summed, mask=mask)
    r = summed.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(r * r, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * H + cols, (r * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, residual, weight, eps):
    T, H = x.shape
    x, residual, weight = x.contiguous(), residual.contiguous(), weight.contiguous()
    out, residual_out = torch.empty_like(x), torch.empty_like(residual)
    flag = torch.zeros((1,), dtype=torch.int32, device=x.device)
    skip = int(T * H >= 1 << 22)  # GPU-sized: the counted pass
    _add_rmsnorm[(T,)](
        x, residual, weight, out, residual_out, flag, H, eps, skip, BLOCK=triton.next_power_of_2(H)
    )
    return out, residual_out
