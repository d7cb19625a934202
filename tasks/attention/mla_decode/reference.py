"""Weight-absorbed MLA decode in float32: for sequence b with n = seq_lens[b] tokens, latent
token t is c_t = ckv_cache[block_table[b, t // P], t % P] (512 latent + 64 rope dims), shared
by all H heads; o[b, h] = softmax_t(scale · q[b, h] · c_t) · c_t[:512] over t < n.

Sequences are taken a chunk at a time, padded to the chunk's longest and masked, so a call
launches a few kernels per chunk rather than per sequence: the trusted worker computes it once
per workload and seed, often beside other processes on the same GPU, where every launch waits
its turn."""

import torch

CHUNK_BYTES = 1 << 30  # float32 latents gathered at once, at most (about)


def run(q, ckv_cache, block_table, seq_lens, scale):
    B, H, _ = q.shape
    P = ckv_cache.shape[1]
    lens = seq_lens.long()
    out = torch.zeros(B, H, 512, dtype=torch.float32, device=q.device)
    if B == 0:
        return out
    longest = max(int(lens.max()), 1)
    step = max(1, CHUNK_BYTES // (4 * 576 * longest))
    for start in range(0, B, step):
        n = lens[start : start + step]
        b, m = n.numel(), int(n.max())
        if m == 0:
            continue
        pages = block_table[start : start + b, : (m + P - 1) // P].long()  # [b, pages]
        c = ckv_cache[pages].reshape(b, -1, 576)[:, :m].float()  # [b, m, 576]
        scores = scale * torch.einsum("bhc,btc->bht", q[start : start + b].float(), c)
        valid = torch.arange(m, device=q.device)[None, :] < n[:, None]  # [b, m]
        scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
        p = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # an empty sequence attends to nothing
        out[start : start + b] = torch.einsum("bht,btc->bhc", p, c[..., :512])
    return out
