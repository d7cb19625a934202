"""Neox-style rotary embedding in float32 (vLLM's rotary_embedding with is_neox=True, over the
whole head): for each token t with c = cache[positions[t], :d/2], s = cache[positions[t], d/2:],
and every head vector x = [x1 | x2] (two halves of d/2):
out = [x1·c - x2·s | x2·c + x1·s]. Returns the rotated q and k (the candidate writes them into
q and k in place)."""

import torch


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def run(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor):
    cs = cos_sin_cache.float()[positions]  # [T, d]
    cos, sin = cs.chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]  # broadcast over heads
    return _rotate(q, cos, sin), _rotate(k, cos, sin)
