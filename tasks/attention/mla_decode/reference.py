"""Weight-absorbed MLA decode in float32: for sequence b with n = seq_lens[b] tokens, latent
token t is c_t = ckv_cache[block_table[b, t // P], t % P] (512 latent + 64 rope dims), shared
by all H heads; o[b, h] = softmax_t(scale · q[b, h] · c_t) · c_t[:512] over t < n."""

import torch


def run(q, ckv_cache, block_table, seq_lens, scale):
    B, H, _ = q.shape
    P = ckv_cache.shape[1]
    out = torch.empty(B, H, 512, dtype=torch.float32, device=q.device)
    for b, n in enumerate(seq_lens.tolist()):
        pages = block_table[b, : (n + P - 1) // P].long()
        c = ckv_cache[pages].reshape(-1, 576)[:n].float()  # [n, 576]
        p = torch.softmax(scale * (q[b].float() @ c.T), dim=-1)  # [H, n]
        out[b] = p @ c[:, :512]
    return out
