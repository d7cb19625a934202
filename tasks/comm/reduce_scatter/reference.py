"""Reduce-scatter in one process: the input of every rank is [W·T, H]; rank r's output is
rows r·T .. (r + 1)·T − 1 of Σ_q x_q, accumulated in float32 from the bfloat16 inputs.
Returned per rank: the exact chunk (float32), and for check.py Σ_q |x_q| over the chunk and
the number of terms W."""

import torch


def run_all(inputs_by_rank: list[list]) -> list:
    W = len(inputs_by_rank)
    x0 = inputs_by_rank[0][0]
    T = x0.shape[0] // W
    total = torch.zeros(x0.shape, dtype=torch.float32, device=x0.device)
    abs_total = torch.zeros_like(total)
    for (x,) in inputs_by_rank:
        xf = x.float()
        total += xf
        abs_total += xf.abs()
    terms = torch.tensor(W, dtype=torch.int64)
    return [
        (total[r * T : (r + 1) * T].clone(), abs_total[r * T : (r + 1) * T].clone(), terms)
        for r in range(W)
    ]
