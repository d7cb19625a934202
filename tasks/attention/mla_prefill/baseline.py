"""What a serving stack runs for MLA prefill, the first of these that imports:
1. flash_attn.flash_attn_varlen_func with v zero-padded to DQK and the output sliced back (vLLM's
   FlashAttention-2 path for MLA prefill; FA3 on Hopper takes DV ≠ DQK directly);
2. torch.nn.functional.scaled_dot_product_attention per sequence with is_causal, q and k of
   DQK dims and v of DV (the memory-efficient or cuDNN backend on NVIDIA, which take DV ≠ DQK;
   the CPU kernel on CPU).
The sequence bounds and the scale are read to the host (serving engines carry both there)."""

import torch
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_varlen_func
except Exception:  # noqa: BLE001 - any import failure means "not available"
    flash_attn_varlen_func = None

IMPL = "torch"  # which implementation the last call used (the result's baseline_impl)


def _flash_attn(q, k, v, cu_seqlens, scale):
    scale = float(scale)  # a host sync, as the bounds are
    S = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    DV = v.shape[2]
    vp = F.pad(v, (0, q.shape[2] - DV))
    o = flash_attn_varlen_func(
        q, k, vp, cu_seqlens, cu_seqlens, S, S, softmax_scale=scale, causal=True
    )
    return o[..., :DV].contiguous()


def _sdpa(q, k, v, cu_seqlens, scale):
    scale = float(scale)  # a host sync, as the bounds are
    T, H, _ = q.shape
    out = torch.empty(T, H, v.shape[2], dtype=q.dtype, device=q.device)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        s, e = bounds[b], bounds[b + 1]
        o = F.scaled_dot_product_attention(
            q[s:e].transpose(0, 1).unsqueeze(0),
            k[s:e].transpose(0, 1).unsqueeze(0),
            v[s:e].transpose(0, 1).unsqueeze(0),
            is_causal=True,
            scale=scale,
        )
        out[s:e] = o[0].transpose(0, 1)
    return out


IMPLS = {"flash-attn": _flash_attn if flash_attn_varlen_func is not None else None, "torch": _sdpa}


def run(q, k, v, cu_seqlens, scale):
    global IMPL
    for name, fn in IMPLS.items():
        if fn is not None and (name == "torch" or q.is_cuda):
            IMPL = name
            return fn(q, k, v, cu_seqlens, scale)
