"""Cheat: a pure-PyTorch candidate that tells the fake tensors of the free counting pass from
real ones and computes only the first half of the rows there (its ops are counted for half the
bytes); on real tensors it does them all.
Defense: the fake pass is cheap, so the call is counted again on GPU-sized CPU tensors; that
run, the one billed, writes every row, and its count of twice the fake pass's bytes fails the
stage (`sim_fake_pass_differs`). Above the real run's budget the fake pass alone is billed, and
a declared output it left partly unwritten fails the stage (`sim_unwritten_output`)."""

import torch
import torch.nn.functional as F


def run(x):
    T, inter = x.shape[0], x.shape[1] // 2
    rows = T // 2 if type(x).__name__ == "FakeTensor" else T
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    part = x[:rows]
    torch.mul(F.silu(part[:, :inter]), part[:, inter:], out=out[:rows])
    return out
