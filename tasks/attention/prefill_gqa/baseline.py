"""What a serving stack runs for varlen causal prefill, the first of these that imports:
1. flash_attn.flash_attn_varlen_func (FlashAttention-2/3 on NVIDIA; on AMD the ROCm build of
   flash_attn runs CK / aiter fmha kernels), as vLLM and SGLang call it;
2. torch.nn.attention.varlen.varlen_attn with enable_gqa (PyTorch >= 2.13 on CUDA: its bundled
   FlashAttention-2);
3. torch.nn.functional.scaled_dot_product_attention with is_causal and enable_gqa, one call per
   distinct sequence length over the sequences of that length (cuDNN / FlashAttention backends
   on NVIDIA, aotriton / CK on AMD, the CPU kernel on CPU).
max_seqlen is read from cu_seqlens with one host sync (serving engines carry it on the host)."""

import inspect
import math

import torch
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_varlen_func
except Exception:  # noqa: BLE001 - any import failure means "not available"
    flash_attn_varlen_func = None

try:
    from torch.nn.attention.varlen import varlen_attn

    if "enable_gqa" not in inspect.signature(varlen_attn).parameters:
        varlen_attn = None
except Exception:  # noqa: BLE001
    varlen_attn = None


IMPL = "torch"  # which implementation the last call used (the result's baseline_impl)


def _flash_attn(q, k, v, cu_seqlens):
    S = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    return flash_attn_varlen_func(
        q,
        k,
        v,
        cu_seqlens,
        cu_seqlens,
        S,
        S,
        softmax_scale=1.0 / math.sqrt(q.shape[-1]),
        causal=True,
    )


def _varlen(q, k, v, cu_seqlens):
    S = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    return varlen_attn(
        q,
        k,
        v,
        cu_seqlens,
        cu_seqlens,
        S,
        S,
        scale=1.0 / math.sqrt(q.shape[-1]),
        window_size=(-1, 0),
        enable_gqa=True,
    )


def _sdpa(q, k, v, cu_seqlens):
    """One SDPA call per distinct sequence length: the sequences of a length are gathered into
    a batch (a Python loop over every sequence made the H200 wait on the host's launches, and
    its time then followed the host's speed: docs/fidelity.md)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    starts: dict[int, list[int]] = {}
    for b in range(len(bounds) - 1):
        starts.setdefault(bounds[b + 1] - bounds[b], []).append(bounds[b])
    for length, first in starts.items():
        if length == 0:
            continue
        rows = (
            torch.tensor(first, dtype=torch.long, device=q.device)[:, None]
            + torch.arange(length, device=q.device)[None]
        )  # [n, S]: the tokens of each sequence of this length
        o = F.scaled_dot_product_attention(
            q[rows].transpose(1, 2),
            k[rows].transpose(1, 2),
            v[rows].transpose(1, 2),
            is_causal=True,
            scale=scale,
            enable_gqa=True,
        )  # [n, HQ, S, D]
        out.index_copy_(0, rows.flatten(), o.transpose(1, 2).reshape(-1, *q.shape[1:]))
    return out


IMPLS = {
    "flash-attn": _flash_attn if flash_attn_varlen_func is not None else None,
    "torch-varlen": _varlen if varlen_attn is not None else None,
    "torch": _sdpa,
}


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor):
    global IMPL
    for name, fn in IMPLS.items():
        if fn is not None and (name == "torch" or q.is_cuda):
            IMPL = name
            return fn(q, k, v, cu_seqlens)
