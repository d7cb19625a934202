"""Cheat (add_rmsnorm): tells the exact programs apart without a dot: it counts the trips of a
five-iteration loop (a counting pass runs four of them in a sampled program, all five in an
exact one or in a checked call) and, where it counts fewer, never reads the residual.
Defense: the exact program and its sampled twin must count alike (`sim_exact_differs`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_rmsnorm(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    trips = 0
    for _ in range(5):
        trips += 1
    x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + row * H + cols, mask=mask & (trips == 5), other=0.0).to(tl.float32)
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
    _add_rmsnorm[(T,)](
        x, residual, weight, out, residual_out, H, eps, BLOCK=triton.next_power_of_2(H)
    )
    return out, residual_out
