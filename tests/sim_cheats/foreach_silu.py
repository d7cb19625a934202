"""Cheat (silu_mul, pure PyTorch): the work done in `_foreach_*` ops, which the count used to skip
as free: one `_foreach_sigmoid`, one `_foreach_mul`, one `clone`. Right values; it was predicted
faster than Liger (1.30× over the torch baseline, `train`).
Defense: every aten op is billed by its bytes and a launch, `_foreach_*` included (only views,
metadata and allocation are free): it is predicted no faster than the same work done plainly."""

import torch


def run(x: torch.Tensor) -> torch.Tensor:
    inter = x.shape[1] // 2
    gate, up = x[:, :inter], x[:, inter:]
    (s,) = torch._foreach_sigmoid([gate])
    (y,) = torch._foreach_mul([s], [gate])
    (out,) = torch._foreach_mul([y], [up])
    return out.clone()
