"""Paged GQA attention of Q query tokens per sequence (speculative decoding's verification, MTP)
in float32: sequence b holds n = seq_lens[b] tokens, its last Q being the queries, so query i
(0 ≤ i < Q) sits at position n − Q + i and attends keys t ≤ n − Q + i; key/value token t is
k_cache[block_table[b, t // P], t % P]; query head h reads kv head h // (HQ / HKV) and
o[b, i, h] = softmax_t(q[b, i, h] · k[t] / sqrt(D)) · v[t]. Sequences a chunk at a time, padded
to the chunk's longest and masked."""

import math

import torch

CHUNK_BYTES = 1 << 30


def run(q, k_cache, v_cache, block_table, seq_lens):
    B, Q, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    lens = seq_lens.long()
    out = torch.zeros(B, Q, HQ, D, dtype=torch.float32, device=q.device)
    longest = max(int(lens.max()), 1)
    step = max(1, CHUNK_BYTES // (2 * 4 * HKV * D * longest))
    for start in range(0, B, step):
        n = lens[start : start + step]
        b, m = n.numel(), int(n.max())
        pages = block_table[start : start + b, : (m + P - 1) // P].long()
        k = k_cache[pages].reshape(b, -1, HKV, D)[:, :m].float()  # [b, m, HKV, D]
        v = v_cache[pages].reshape(b, -1, HKV, D)[:, :m].float()
        qb = q[start : start + b].float().view(b, Q, HKV, G, D)
        scores = torch.einsum("bqhgd,bthd->bhgqt", qb, k) / math.sqrt(D)
        last = n[:, None] - Q + torch.arange(Q, device=q.device)[None, :]  # [b, Q]
        valid = torch.arange(m, device=q.device)[None, None, :] <= last[:, :, None]  # [b, Q, m]
        scores = scores.masked_fill(~valid[:, None, None], float("-inf"))
        p = torch.softmax(scores, dim=-1)
        o = torch.einsum("bhgqt,bthd->bqhgd", p, v)
        out[start : start + b] = o.reshape(b, Q, HQ, D)
    return out
