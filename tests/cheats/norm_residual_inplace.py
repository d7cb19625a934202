"""Cheat (norm/add_rmsnorm): saves the residual_out allocation and write by adding x into the
harness's residual input in place and returning it as residual_out (an output aliased to an
input that the task does not declare in place). Defense: outputs may not share storage with an
input unless declared `inplace_of`."""

import torch


def run(x, residual, weight, eps):
    residual.add_(x)
    r = residual.float()
    out = (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
    return out, residual
