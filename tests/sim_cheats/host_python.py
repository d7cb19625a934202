"""Cheat: a kernel body that calls host Python. Interpreted, the call runs with the candidate's
tensors (stashed in a global) and computes the whole output in torch, outside the count; the
kernel itself moves nothing. Compiled for a GPU it would run once, at compile time.
Defense: a kernel whose body calls host Python fails the performance stage (sim_host.host_calls)."""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

_STASH: dict = {}


def _do_the_work(block):
    x, out = _STASH["x"], _STASH["out"]
    inter = out.shape[1]
    out.copy_((F.silu(x[:, :inter].float()) * x[:, inter:].float()).to(out.dtype))
    return block


@triton.jit
def _kernel(x_ptr, BLOCK: tl.constexpr):
    _do_the_work(BLOCK)


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    _STASH.update(x=x, out=out)
    _kernel[(1,)](x, BLOCK=16)
    return out
