"""Causal multi-head attention with a query-key head size DQK and a value head size DV (MLA's
prefill), over a packed variable-length batch, in float32: for each sequence b (tokens
cu_seqlens[b] .. cu_seqlens[b+1]-1) and head h, o[i] = softmax_j<=i(scale · q[i]·k[j]) · v[j]
(scale: a one-element tensor),
positions counted from the sequence's start. Queries in chunks so that the score matrix of a
long sequence fits in memory."""

import torch


def run(q, k, v, cu_seqlens, scale):
    T, H, _ = q.shape
    DV = v.shape[2]
    out = torch.empty(T, H, DV, dtype=torch.float32, device=q.device)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        s, e = bounds[b], bounds[b + 1]
        S = e - s
        kb = k[s:e].float().permute(1, 0, 2)  # [H, S, DQK]
        vb = v[s:e].float().permute(1, 0, 2)  # [H, S, DV]
        chunk = max(1, (1 << 26) // (H * S))
        for c0 in range(0, S, chunk):
            c1 = min(S, c0 + chunk)
            qc = q[s + c0 : s + c1].float().permute(1, 0, 2)
            scores = torch.matmul(qc, kb[:, :c1].transpose(1, 2)) * scale.double().item()
            rows = torch.arange(c0, c1, device=q.device)[:, None]
            cols = torch.arange(c1, device=q.device)[None, :]
            scores.masked_fill_(cols > rows, float("-inf"))
            out[s + c0 : s + c1] = torch.matmul(torch.softmax(scores, dim=-1), vb[:, :c1]).permute(
                1, 0, 2
            )
    return out
