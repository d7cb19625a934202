"""What a serving stack runs for paged decode: FlashInfer's BatchDecodeWithPagedKVCacheWrapper
(NHD layout, the block table converted to its CSR page list) if flashinfer imports; otherwise
the best torch composition: gather every sequence's pages (block_table indexes the pool),
then one F.scaled_dot_product_attention call with the G = HQ/HKV query heads of a kv head as
G query rows and a boolean length mask (memory-efficient attention backend on NVIDIA and AMD,
the CPU kernel on CPU). No host sync, so it can be captured in a CUDA graph.
FlashAttention's flash_attn_with_kvcache is not used: its paged KV needs pages of 256 tokens.

On CUDA a second torch composition comes before SDPA (task.yaml `baselines:`, `torch-bmm`):
the memory-efficient kernel has no split over the context, so a small batch occupies a few
SMs. Instead two cuBLAS batched GEMMs over each sequence's gathered [N·HKV, D] rows as they
lie: every query head against every kv head's rows (HKV times the FLOPs of attention, which
decode has to spare), the other heads' scores and the positions past the length masked to
-inf, softmax in float32, and P (bfloat16) times the same rows of V: the masked entries
weigh nothing. It runs where sequences × kv heads ≤ 32 (BMM_BELOW); SDPA runs above. `IMPL` names the
one the last call used (the result's baseline_impl)."""

import math

import torch
import torch.nn.functional as F

IMPL = "torch"

try:
    import flashinfer
except Exception:  # noqa: BLE001 - any import failure means "not available"
    flashinfer = None

_wrappers = {}


def _flashinfer(q, k_cache, v_cache, block_table, seq_lens):
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
    indices = block_table[used]
    last = (seq_lens - (pages - 1) * P).to(torch.int32)
    wrapper.plan(
        indptr, indices, last, HQ, HKV, D, P, q_data_type=q.dtype, kv_data_type=k_cache.dtype
    )
    return wrapper.run(q, (k_cache, v_cache))


def _torch_bmm(q, k_cache, v_cache, block_table, seq_lens):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    N = block_table.shape[1] * P
    idx = block_table.long()
    k = k_cache[idx].view(B, N * HKV, D)  # row n·HKV + h: token n of kv head h
    v = v_cache[idx].view(B, N * HKV, D)
    s = (
        torch.bmm(q, k.transpose(1, 2), out_dtype=torch.float32)
        .mul_(1.0 / math.sqrt(D))
        .view(B, HQ, N, HKV)
    )
    own = (
        torch.arange(HKV, device=q.device)[None, :]
        == (torch.arange(HQ, device=q.device) // (HQ // HKV))[:, None]
    )  # [HQ, HKV]
    live = torch.arange(N, device=q.device)[None, :] < seq_lens[:, None]  # [B, N]
    s.masked_fill_(~(live[:, None, :, None] & own[None, :, None, :]), float("-inf"))
    p = torch.softmax(s.view(B, HQ, N * HKV), dim=-1).to(q.dtype)
    return torch.bmm(p, v)


def _torch(q, k_cache, v_cache, block_table, seq_lens):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    N = block_table.shape[1] * P
    idx = block_table.long()
    k = k_cache[idx].view(B, N, HKV, D).transpose(1, 2)  # [B, HKV, N, D]
    v = v_cache[idx].view(B, N, HKV, D).transpose(1, 2)
    mask = (torch.arange(N, device=q.device)[None, :] < seq_lens[:, None])[:, None, None, :]
    o = F.scaled_dot_product_attention(
        q.view(B, HKV, HQ // HKV, D), k, v, attn_mask=mask, scale=1.0 / math.sqrt(D)
    )
    return o.reshape(B, HQ, D)


IMPLS = {
    "flashinfer": _flashinfer if flashinfer is not None else None,
    "torch-bmm": _torch_bmm,
    "torch": _torch,
}


_BMM_OK = True  # torch.bmm's float32 out_dtype: CUDA builds of torch >= 2.8
BMM_BELOW = 32  # sequences × kv heads up to which torch-bmm runs instead of SDPA


def run(q, k_cache, v_cache, block_table, seq_lens):
    global IMPL, _BMM_OK
    if q.is_cuda and flashinfer is not None:
        IMPL = "flashinfer"
        return IMPLS[IMPL](q, k_cache, v_cache, block_table, seq_lens)
    # The batched GEMMs pay off where the memory-efficient kernel has few blocks to spread:
    # measured on the H200, 2x faster at B·HKV = 8, slower from B·HKV = 64 up.
    if q.is_cuda and _BMM_OK and q.shape[0] * k_cache.shape[2] <= BMM_BELOW:
        try:
            out = _torch_bmm(q, k_cache, v_cache, block_table, seq_lens)
            IMPL = "torch-bmm"
            return out
        except (RuntimeError, TypeError, NotImplementedError):
            _BMM_OK = False
    IMPL = "torch"
    return _torch(q, k_cache, v_cache, block_table, seq_lens)
