"""The best torch composition for gpt-oss's MXFP4 experts (no library kernel imports on the
measured image; task.yaml's baseline_note says which would): dequantize the MXFP4 weights to
bfloat16 (exact: every e2m1 value times a power of two is a bfloat16), then

- decode (T·K ≤ E slots): gather each slot's expert weights, dequantize only those, and run
  the two projections as batched GEMMs (torch.bmm), one matrix per slot;
- otherwise: dequantize every local expert, sort the T·K rows by expert and run
  torch._grouped_mm (CUTLASS grouped GEMM on Hopper) for W13 and W2, with the biases, the
  clamped SwiGLU and the routing weight in between, and index_add_ back per token.

bfloat16 intermediates, float32 sum over the K slots, no host synchronisation. `IMPL` names
the implementation (the result's baseline_impl)."""

import torch

IMPL = "torch"
ALPHA = 1.702
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_tables = {}


def _dequantize(packed, scale):
    """[..., N, KD // 2] codes, [..., N, KD // 32] scales -> [..., N, KD] bfloat16."""
    key = packed.device
    if key not in _tables:
        _tables[key] = torch.tensor(_E2M1, dtype=torch.bfloat16, device=packed.device)
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).flatten(-2).long()
    values = _tables[key][codes]
    factor = torch.exp2(scale.float() - 127.0).to(torch.bfloat16)
    shape = values.shape
    return (values.view(*shape[:-1], -1, 32) * factor[..., None]).view(shape)


def _swiglu(gu, limit):
    gate = gu[..., 0::2].float().clamp(max=limit)
    up = gu[..., 1::2].float().clamp(-limit, limit)
    return (gate * torch.sigmoid(ALPHA * gate) * (up + 1)).to(torch.bfloat16)


def _grouped(a, b, offs, counts):
    """a [M, K] rows sorted by expert, b [E, N, K] -> each row times its expert's b[e].T."""
    try:
        return torch._grouped_mm(a, b.transpose(1, 2), offs=offs)
    except (RuntimeError, AttributeError, NotImplementedError):
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        start = 0
        for e, c in enumerate(counts.tolist()):
            if c:
                out[start : start + c] = a[start : start + c] @ b[e].T
            start += c
        return out


def _per_slot(hidden, topk_ids, topk_weights, w13, w13_scale, b13, w2, w2_scale, b2, limit):
    T, K = topk_ids.shape
    e = topk_ids.flatten().long()
    x = hidden.repeat_interleave(K, dim=0)[:, :, None]  # [T·K, H, 1]
    gu = torch.bmm(_dequantize(w13[e], w13_scale[e]), x)[:, :, 0] + b13[e]
    a = _swiglu(gu, limit)[:, :, None]
    y = torch.bmm(_dequantize(w2[e], w2_scale[e]), a)[:, :, 0] + b2[e]
    y = y.float().view(T, K, -1) * topk_weights[:, :, None]
    return y.sum(dim=1).to(hidden.dtype)


def _sorted(hidden, topk_ids, topk_weights, w13, w13_scale, b13, w2, w2_scale, b2, limit):
    T, K = topk_ids.shape
    E = w13.shape[0]
    flat = topk_ids.flatten()
    order = torch.argsort(flat, stable=True)
    experts = flat.long()
    counts = torch.zeros(E, dtype=torch.int64, device=flat.device).scatter_add_(
        0, experts, torch.ones_like(experts)
    )
    offs = torch.cumsum(counts, 0).to(torch.int32)
    token, row_expert = order // K, experts[order]
    gu = _grouped(hidden[token], _dequantize(w13, w13_scale), offs, counts) + b13[row_expert]
    a = _swiglu(gu, limit)
    y = _grouped(a, _dequantize(w2, w2_scale), offs, counts) + b2[row_expert]
    y = y.float() * topk_weights.flatten()[order, None]
    out = torch.zeros(T, hidden.shape[1], dtype=torch.float32, device=hidden.device)
    return out.index_add_(0, token, y).to(hidden.dtype)


def _torch(*args):
    topk_ids, w13 = args[1], args[3]
    if topk_ids.numel() <= w13.shape[0]:  # fewer slots than experts: dequantize only theirs
        return _per_slot(*args)
    return _sorted(*args)


IMPLS = {"torch": _torch}


def run(hidden, topk_ids, topk_weights, w13, w13_scale, b13, w2, w2_scale, b2, swiglu_limit):
    global IMPL
    IMPL = "torch"
    return _torch(
        hidden, topk_ids, topk_weights, w13, w13_scale, b13, w2, w2_scale, b2, swiglu_limit
    )
