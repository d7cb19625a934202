"""Local paged GQA decode with attention sinks in float32: sequence b attends its tokens
starts[b] <= t < seq_lens[b], token t being k_cache[block_table[b, t // P], t % P]; query head
h reads kv head h // (HQ / HKV), s_t = q[b, h] · k_t / sqrt(D), and
o[b, h] = Σ_t exp(s_t) v_t / (exp(sinks[h]) + Σ_t exp(s_t)) (a sink of −inf adds nothing).
Sequences a chunk at a time, padded to the chunk's widest span and masked."""

import math

import torch

CHUNK_BYTES = 1 << 30


def run(q, k_cache, v_cache, block_table, seq_lens, starts, sinks, span):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    lens, first = seq_lens.long(), starts.long()
    out = torch.zeros(B, HQ, D, dtype=torch.float32, device=q.device)
    if B == 0:
        return out
    widest = max(int((lens - first).max()), 1)
    step = max(1, CHUNK_BYTES // (2 * 4 * HKV * D * widest))
    for s0 in range(0, B, step):
        n, f = lens[s0 : s0 + step], first[s0 : s0 + step]
        b = n.numel()
        t = f[:, None] + torch.arange(widest, device=q.device)[None, :]  # [b, widest]
        valid = t < n[:, None]
        t = torch.where(valid, t, f[:, None])
        page = block_table[s0 : s0 + b].long().gather(1, t // P)
        k = k_cache[page, t % P].float()  # [b, widest, HKV, D]
        v = v_cache[page, t % P].float()
        qb = q[s0 : s0 + b].float().view(b, HKV, G, D)
        scores = torch.einsum("bhgd,bthd->bhgt", qb, k) / math.sqrt(D)
        scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
        sink = sinks.float().view(1, HKV, G, 1).expand(b, HKV, G, 1)
        p = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
        out[s0 : s0 + b] = torch.einsum("bhgt,bthd->bhgd", p, v).reshape(b, HQ, D)
    return out
