"""What vLLM/SGLang run unfused: FlashInfer's rmsnorm over the [T·H, d] head rows of q and of
k (bfloat16 out), then flashinfer.rope.apply_rope_with_cos_sin_cache_inplace (neox), where
FlashInfer is importable on CUDA; otherwise the torch composition: F.rms_norm per head
(bfloat16 out), then the rotation in float32, copied back into q and k."""

import torch
import torch.nn.functional as F

try:
    from flashinfer.norm import rmsnorm as _fi_rmsnorm
    from flashinfer.rope import apply_rope_with_cos_sin_cache_inplace as _fi_rope
except Exception:  # noqa: BLE001 - not installed, or no GPU build
    _fi_rmsnorm = _fi_rope = None


def run(positions, q, k, q_weight, k_weight, cos_sin_cache, eps):
    T, Hq, d = q.shape
    Hkv = k.shape[1]
    if q.device.type == "cuda" and _fi_rope is not None:
        q.copy_(_fi_rmsnorm(q.view(T * Hq, d), q_weight, eps).view(T, Hq, d))
        k.copy_(_fi_rmsnorm(k.view(T * Hkv, d), k_weight, eps).view(T, Hkv, d))
        _fi_rope(positions, q.view(T, Hq * d), k.view(T, Hkv * d), d, cos_sin_cache, is_neox=True)
        return q, k
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    for x, w in ((q, q_weight), (k, k_weight)):
        n1, n2 = F.rms_norm(x, (d,), w, eps).float().chunk(2, dim=-1)
        x.copy_(torch.cat([n1 * cos - n2 * sin, n2 * cos + n1 * sin], dim=-1))
    return q, k
