"""What a serving stack runs for paged decode over an fp8 cache: FlashInfer's
BatchDecodeWithPagedKVCacheWrapper with kv_data_type float8_e4m3fn and the two scales (NHD) if
flashinfer imports; otherwise the best torch composition: gather every sequence's pages (fp8:
half the bytes of a bfloat16 gather), widen them to bfloat16 (exact), fold k_scale into q and v_scale into the output, then
one F.scaled_dot_product_attention with the G = HQ/HKV query heads of a kv head as G query rows
and a boolean length mask (memory-efficient backend on NVIDIA, the CPU kernel on CPU). No host
sync. `IMPL` names the one the last call used (the result's baseline_impl)."""

import math

import torch
import torch.nn.functional as F

IMPL = "torch"

try:
    import flashinfer
except Exception:  # noqa: BLE001 - any import failure means "not available"
    flashinfer = None

_wrappers = {}


def _flashinfer(q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    key = (q.device, HQ, HKV, D, P)
    if key not in _wrappers:
        workspace = torch.empty(256 << 20, dtype=torch.uint8, device=q.device)
        _wrappers[key] = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
    wrapper = _wrappers[key]
    pages = (seq_lens + P - 1) // P
    indptr = torch.zeros(B + 1, dtype=torch.int32, device=q.device)
    indptr[1:] = torch.cumsum(pages, 0)
    used = torch.arange(block_table.shape[1], device=q.device)[None, :] < pages[:, None]
    last = (seq_lens - (pages - 1) * P).to(torch.int32)
    wrapper.plan(
        indptr,
        block_table[used],
        last,
        HQ,
        HKV,
        D,
        P,
        q_data_type=q.dtype,
        kv_data_type=k_cache.dtype,
    )
    return wrapper.run(q, (k_cache, v_cache), k_scale=float(k_scale), v_scale=float(v_scale))


def _torch(q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    N = block_table.shape[1] * P
    idx = block_table.long()
    # fp8 -> bfloat16 is exact; the scales fold into q (k_scale) and the output (v_scale), so
    # nothing is rounded that a fused kernel would keep.
    f8 = k_cache.dtype  # gathered as bytes: indexing float8 tensors is not implemented everywhere
    k = k_cache.view(torch.uint8)[idx].view(f8).to(q.dtype).view(B, N, HKV, D).transpose(1, 2)
    v = v_cache.view(torch.uint8)[idx].view(f8).to(q.dtype).view(B, N, HKV, D).transpose(1, 2)
    qs = (q.float() * k_scale).to(q.dtype).view(B, HKV, HQ // HKV, D)
    mask = (torch.arange(N, device=q.device)[None, :] < seq_lens[:, None])[:, None, None, :]
    o = F.scaled_dot_product_attention(qs, k, v, attn_mask=mask, scale=1.0 / math.sqrt(D))
    return (o.reshape(B, HQ, D).float() * v_scale).to(q.dtype)


IMPLS = {"flashinfer": _flashinfer if flashinfer is not None else None, "torch": _torch}


def run(q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale):
    global IMPL
    IMPL = "flashinfer" if q.is_cuda and flashinfer is not None else "torch"
    return IMPLS[IMPL](q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale)
