"""Paged GQA decode over an fp8 cache in float32: for sequence b with n = seq_lens[b] tokens,
key token t is k_scale · k_cache[block_table[b, t // P], t % P] (value likewise with v_scale);
query head h reads kv head h // (HQ / HKV) and
o[b, h] = softmax_t(q[b, h] · k[t] / sqrt(D)) · v[t] over t < n.

Sequences are taken a chunk at a time, padded to the chunk's longest and masked, so a call
launches a few kernels per chunk rather than per sequence: the trusted worker computes it once
per workload and seed, often beside other processes on the same GPU, where every launch waits
its turn."""

import math

import torch

CHUNK_BYTES = 1 << 30  # float32 keys and values gathered at once, at most (about)


def run(q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    lens = seq_lens.long()
    out = torch.zeros(B, HQ, D, dtype=torch.float32, device=q.device)
    if B == 0:
        return out
    longest = max(int(lens.max()), 1)
    step = max(1, CHUNK_BYTES // (2 * 4 * HKV * D * longest))
    for start in range(0, B, step):
        n = lens[start : start + step]
        b, m = n.numel(), int(n.max())
        if m == 0:
            continue
        pages = block_table[start : start + b, : (m + P - 1) // P].long()  # [b, pages]
        # gathered as bytes: indexing float8 tensors is not implemented everywhere
        f8 = k_cache.dtype
        k = (
            k_cache.view(torch.uint8)[pages].view(f8).reshape(b, -1, HKV, D)[:, :m].float()
            * k_scale.float()
        )
        v = (
            v_cache.view(torch.uint8)[pages].view(f8).reshape(b, -1, HKV, D)[:, :m].float()
            * v_scale.float()
        )
        qb = q[start : start + b].float().view(b, HKV, G, D)
        scores = torch.einsum("bhgd,bthd->bhgt", qb, k) / math.sqrt(D)
        valid = torch.arange(m, device=q.device)[None, :] < n[:, None]  # [b, m]
        scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
        p = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # an empty sequence attends to nothing
        out[start : start + b] = torch.einsum("bhgt,bthd->bhgd", p, v).reshape(b, HQ, D)
    return out
