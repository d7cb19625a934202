"""Qwen3's per-head q/k RMSNorm followed by neox RoPE, in float32 with no intermediate
rounding: for every head vector x (d elements) of q (weight q_weight) and of k (weight
k_weight): n = x · rsqrt(mean(x²) + eps) · weight, then with c = cache[positions[t], :d/2],
s = cache[positions[t], d/2:] and n = [n1 | n2]: out = [n1·c - n2·s | n2·c + n1·s]. Returns
the new q and k (the candidate writes them into q and k in place)."""

import torch


def _norm_rope(x, weight, eps, cos, sin):
    xf = x.float()
    n = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    n1, n2 = n.chunk(2, dim=-1)
    return torch.cat([n1 * cos - n2 * sin, n2 * cos + n1 * sin], dim=-1)


def run(positions, q, k, q_weight, k_weight, cos_sin_cache, eps):
    cos, sin = cos_sin_cache.float()[positions].chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return _norm_rope(q, q_weight, eps, cos, sin), _norm_rope(k, k_weight, eps, cos, sin)
