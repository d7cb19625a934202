"""gpt-oss sliding-window attention with sinks, in float32: for each sequence and query head h
(kv head h // (HQ/HKV)), query i attends keys j with i - window < j <= i (positions within
the sequence) and o[i, h] = Σ_j exp(s_ij) v_j / (exp(sinks[h]) + Σ_j exp(s_ij)),
s_ij = q_i · k_j / sqrt(D): the sink joins the softmax denominator only."""

import math

import torch


def run(q, k, v, sinks, cu_seqlens, window):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    G = HQ // HKV
    scale = 1.0 / math.sqrt(D)
    out = torch.empty(T, HQ, D, dtype=torch.float32, device=q.device)
    sink = sinks.float().view(HQ, 1, 1)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        s, e = bounds[b], bounds[b + 1]
        S = e - s
        chunk = max(1, (1 << 24) // (HQ * (window + 1)))
        for c0 in range(0, S, chunk):
            c1 = min(S, c0 + chunk)
            k0 = max(0, c0 - window + 1)  # first key any query of the chunk can see
            qc = q[s + c0 : s + c1].float().permute(1, 0, 2)  # [HQ, c, D]
            kc = k[s + k0 : s + c1].float().permute(1, 0, 2).repeat_interleave(G, dim=0)
            vc = v[s + k0 : s + c1].float().permute(1, 0, 2).repeat_interleave(G, dim=0)
            scores = torch.matmul(qc, kc.transpose(1, 2)) * scale  # [HQ, c, keys]
            rows = torch.arange(c0, c1, device=q.device)[:, None]
            cols = torch.arange(k0, c1, device=q.device)[None, :]
            scores.masked_fill_((cols > rows) | (cols <= rows - window), float("-inf"))
            full = torch.cat([scores, sink.expand(HQ, c1 - c0, 1)], dim=-1)
            p = torch.softmax(full, dim=-1)[..., :-1]
            out[s + c0 : s + c1] = torch.matmul(p, vc).permute(1, 0, 2)
    return out
