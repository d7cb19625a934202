"""Causal GQA attention over a packed variable-length batch, in float32: for each sequence b
(tokens cu_seqlens[b] .. cu_seqlens[b+1]-1) and query head h (kv head h // (HQ // HKV)),
o[i] = softmax_j<=i(q[i]·k[j] / sqrt(D)) · v[j], positions counted from the sequence's start.
Queries are processed in chunks so the score matrix of a 16k-token sequence fits in memory."""

import math

import torch


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    G = HQ // HKV
    scale = 1.0 / math.sqrt(D)
    out = torch.empty(T, HQ, D, dtype=torch.float32, device=q.device)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        s, e = bounds[b], bounds[b + 1]
        S = e - s
        kb = k[s:e].float().permute(1, 0, 2).repeat_interleave(G, dim=0)  # [HQ, S, D]
        vb = v[s:e].float().permute(1, 0, 2).repeat_interleave(G, dim=0)
        chunk = max(1, (1 << 26) // (HQ * S))
        for c0 in range(0, S, chunk):
            c1 = min(S, c0 + chunk)
            qc = q[s + c0 : s + c1].float().permute(1, 0, 2)  # [HQ, c, D]
            scores = torch.matmul(qc, kb[:, :c1].transpose(1, 2)) * scale  # keys 0 .. c1-1
            rows = torch.arange(c0, c1, device=q.device)[:, None]
            cols = torch.arange(c1, device=q.device)[None, :]
            scores.masked_fill_(cols > rows, float("-inf"))
            p = torch.softmax(scores, dim=-1)
            out[s + c0 : s + c1] = torch.matmul(p, vb[:, :c1]).permute(1, 0, 2)
    return out
