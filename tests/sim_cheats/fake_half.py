"""Cheat: a pure-PyTorch candidate that tells the fake tensors of the free counting pass from
real ones and computes only the first half of the rows there (its ops are counted for half the
bytes); on real tensors it does them all.
Defense: a declared output the counted ops left partly unwritten fails the stage
(`sim_unwritten_output`): the fake pass records what each op writes."""

import torch
import torch.nn.functional as F


def run(x):
    T, inter = x.shape[0], x.shape[1] // 2
    rows = T // 2 if type(x).__name__ == "FakeTensor" else T
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    part = x[:rows]
    torch.mul(F.silu(part[:, :inter]), part[:, inter:], out=out[:rows])
    return out
