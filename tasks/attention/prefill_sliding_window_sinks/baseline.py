"""The best torch composition for gpt-oss sliding-window attention with sinks (no library op
in PyTorch takes sinks): on CUDA, torch.nn.attention.varlen.varlen_attn (PyTorch's bundled
FlashAttention-2) with window_size = (window - 1, 0) and the log-sum-exp returned, then the sink
folded in exactly: o = o_nosink · sigmoid(lse − sink), since
Σ e^s / (e^sink + Σ e^s) = 1 / (1 + e^(sink − lse)). GQA is passed as enable_gqa where
varlen_attn takes it (PyTorch >= 2.13), else K and V are expanded to HQ heads. On CPU (or if
varlen_attn is missing) the same math runs per sequence in chunks with a band mask."""

import inspect
import math

import torch

try:
    from torch.nn.attention.varlen import AuxRequest, varlen_attn

    _params = inspect.signature(varlen_attn).parameters
    _HAS_GQA = "enable_gqa" in _params
    if "window_size" not in _params:
        varlen_attn = None
except Exception:  # noqa: BLE001 - any import failure means "not available"
    varlen_attn = None


def _varlen(q, k, v, sinks, cu_seqlens, window):
    T, HQ, D = q.shape
    G = HQ // k.shape[1]
    S = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    kwargs = {"enable_gqa": True} if _HAS_GQA else {}
    if not _HAS_GQA and G > 1:
        k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    o, lse = varlen_attn(
        q,
        k,
        v,
        cu_seqlens,
        cu_seqlens,
        S,
        S,
        scale=1.0 / math.sqrt(D),
        window_size=(window - 1, 0),
        return_aux=AuxRequest(lse=True),
        **kwargs,
    )
    lse = lse if lse.shape[0] == T else lse.transpose(0, 1)  # [T, HQ]
    return (o.float() * torch.sigmoid(lse.float() - sinks.float()[None, :])[..., None]).to(q.dtype)


def _composition(q, k, v, sinks, cu_seqlens, window):
    T, HQ, D = q.shape
    G = HQ // k.shape[1]
    out = torch.empty_like(q)
    sink = sinks.float().view(HQ, 1, 1)
    bounds = cu_seqlens.tolist()
    for b in range(len(bounds) - 1):
        s, e = bounds[b], bounds[b + 1]
        for c0 in range(0, e - s, 1024):
            c1 = min(e - s, c0 + 1024)
            k0 = max(0, c0 - window + 1)
            qc = q[s + c0 : s + c1].float().transpose(0, 1)
            kc = k[s + k0 : s + c1].float().transpose(0, 1).repeat_interleave(G, dim=0)
            vc = v[s + k0 : s + c1].float().transpose(0, 1).repeat_interleave(G, dim=0)
            scores = torch.matmul(qc, kc.transpose(1, 2)) / math.sqrt(D)
            rows = torch.arange(c0, c1, device=q.device)[:, None]
            cols = torch.arange(k0, c1, device=q.device)[None, :]
            scores.masked_fill_((cols > rows) | (cols <= rows - window), float("-inf"))
            m = torch.maximum(scores.amax(-1, keepdim=True), sink)
            p = torch.exp(scores - m)
            o = torch.matmul(p, vc) / (p.sum(-1, keepdim=True) + torch.exp(sink - m))
            out[s + c0 : s + c1] = o.transpose(0, 1).to(q.dtype)
    return out


IMPL = "torch"  # which implementation the last call used (the result's baseline_impl)
# task.yaml's `baselines:`, in its order; None where it cannot run here.
IMPLS = {"torch-varlen": _varlen if varlen_attn is not None else None, "torch": _composition}


def run(q, k, v, sinks, cu_seqlens, window):
    global IMPL
    IMPL = "torch-varlen" if q.device.type == "cuda" and varlen_attn is not None else "torch"
    return IMPLS[IMPL](q, k, v, sinks, cu_seqlens, window)
