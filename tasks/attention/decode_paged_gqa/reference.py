"""Paged GQA decode in float32: for sequence b with n = seq_lens[b] tokens, key/value token t
is k_cache[block_table[b, t // P], t % P]; query head h reads kv head h // (HQ / HKV) and
o[b, h] = softmax_t(q[b, h] · k[t] / sqrt(D)) · v[t] over t < n."""

import math

import torch


def run(q, k_cache, v_cache, block_table, seq_lens):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    out = torch.empty(B, HQ, D, dtype=torch.float32, device=q.device)
    for b, n in enumerate(seq_lens.tolist()):
        pages = block_table[b, : (n + P - 1) // P].long()
        k = k_cache[pages].reshape(-1, HKV, D)[:n].float().permute(1, 2, 0)  # [HKV, D, n]
        v = v_cache[pages].reshape(-1, HKV, D)[:n].float().permute(1, 0, 2)  # [HKV, n, D]
        qb = q[b].float().view(HKV, G, D)
        p = torch.softmax(torch.matmul(qb, k) / math.sqrt(D), dim=-1)  # [HKV, G, n]
        out[b] = torch.matmul(p, v).reshape(HQ, D)
    return out
