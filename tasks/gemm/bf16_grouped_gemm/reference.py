"""Grouped GEMM over ragged groups, in float32: for each group g, rows offs[g-1] .. offs[g] - 1
of a (offs[-1] taken as 0) times b[g]ᵀ: out[s:e] = a[s:e] · b[g]ᵀ. Empty groups write nothing."""

import torch


def run(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    out = torch.zeros((a.shape[0], b.shape[1]), dtype=torch.float32, device=a.device)
    ends = offs.tolist()
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            out[start:end] = a[start:end].float() @ b[g].float().T
        start = end
    return out
