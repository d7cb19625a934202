"""FlashInfer's apply_rope_with_cos_sin_cache_inplace (the kernel vLLM and SGLang call for
neox RoPE with a float32 cos/sin cache) where importable; else vLLM's rotary_embedding CUDA op;
else the torch composition (gather the cache rows, two multiplies and an add per half, copy
back into q and k)."""

import torch

try:
    from flashinfer.rope import apply_rope_with_cos_sin_cache_inplace as _fi_rope
except Exception:  # noqa: BLE001 - not installed, or no GPU build
    _fi_rope = None


def _torch_rope(positions, q, k, cos_sin_cache):
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    for x in (q, k):
        x1, x2 = x.float().chunk(2, dim=-1)
        x.copy_(torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1))
    return q, k


def run(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor):
    T, Hq, d = q.shape
    if q.device.type == "cuda" and _fi_rope is not None:
        _fi_rope(positions, q.view(T, Hq * d), k.view(T, -1), d, cos_sin_cache, is_neox=True)
        return q, k
    return _torch_rope(positions, q, k, cos_sin_cache)
