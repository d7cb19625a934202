"""Grouped fp8 block-scaled GEMM in float32: for every real row r (m_indices[r] = e >= 0),
out[r] = dequant(a)[r] · dequant(b[e])ᵀ, where dequant multiplies each fp8 value by its block's
float32 scale (a: 1×128, b[e]: 128×128; a last partial block uses its block's scale).
Padding rows (m_indices = -1) are 0 here; their content in a candidate's output is free
(check.py ignores them)."""

import torch


def run(a, a_scale, b, b_scale, m_indices):
    M, K = a.shape
    E, N, _ = b.shape
    A = a.float() * a_scale.repeat_interleave(128, dim=1)[:, :K]
    out = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    for e in range(E):
        rows = (m_indices == e).nonzero().flatten()
        if rows.numel() == 0:
            continue
        B = (
            b[e].float()
            * b_scale[e].repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:N, :K]
        )
        out[rows] = A[rows] @ B.T
    return out
