"""Cheat (activation/silu_mul): right values in a strided layout: the output is computed into
a [I, T] buffer and returned transposed (a view whose elements read right one by one, but not
the declared row-major tensor a consumer would read). Defense: outputs must be plain, dense,
contiguous tensors."""

import torch
import torch.nn.functional as F


def run(x):
    T, inter = x.shape[0], x.shape[1] // 2
    buf = torch.empty((inter, T), dtype=x.dtype, device=x.device)
    buf.copy_((F.silu(x[:, :inter].float()) * x[:, inter:].float()).t())
    return buf.t()
