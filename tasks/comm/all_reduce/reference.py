"""All-reduce (sum) in one process: every rank's output is Σ_r x_r, accumulated in float32
from the bfloat16 inputs (order-independent up to float32 rounding, 2^-24, far below the
bfloat16 tolerance). Returned per rank: the exact sum (float32), and for check.py Σ_r |x_r|
and the number of terms W."""

import torch


def run_all(inputs_by_rank: list[list]) -> list:
    W = len(inputs_by_rank)
    x0 = inputs_by_rank[0][0]
    total = torch.zeros(x0.shape, dtype=torch.float32, device=x0.device)
    abs_total = torch.zeros_like(total)
    for (x,) in inputs_by_rank:
        xf = x.float()
        total += xf
        abs_total += xf.abs()
    terms = torch.tensor(W, dtype=torch.int64)
    return [(total, abs_total, terms) for _ in range(W)]
