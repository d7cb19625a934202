"""What a serving stack runs for MLA decode: FlashMLA (flash_mla_with_kvcache, the kernel
vLLM and SGLang use on Hopper) if flash_mla imports; otherwise the best torch composition:
gather every sequence's pages (block_table indexes the pool), then one
F.scaled_dot_product_attention call per batch with the H heads as H query rows of a single
head, key = the 576-dim latent+rope rows, value = their first 512 dims, and a boolean length
mask (the memory-efficient backend on NVIDIA and AMD accepts the 576/512 head dims; the CPU
kernel on CPU). No host sync, so it can be captured in a CUDA graph.

On CUDA a second torch composition comes first (task.yaml `baselines:`, `torch-bmm`): the
memory-efficient kernel runs one block per 64 query rows and has no split over the context,
so a batch of one sequence occupies two of 132 SMs; two cuBLAS batched GEMMs (scores in
float32 through bmm's out_dtype, softmax, P in bfloat16 times the 512 latent dims) spread
over the whole context instead. `IMPL` names the one the last call used."""

import torch
import torch.nn.functional as F

IMPL = "torch"

try:
    from flash_mla import flash_mla_with_kvcache, get_mla_metadata
except Exception:  # noqa: BLE001 - any import failure means "not available"
    flash_mla_with_kvcache = None


def _flashmla(q, ckv_cache, block_table, seq_lens, scale):
    H = q.shape[1]
    meta, splits = get_mla_metadata(seq_lens, H, 1)
    o, _ = flash_mla_with_kvcache(
        q.unsqueeze(1),
        ckv_cache.unsqueeze(2),
        block_table,
        seq_lens,
        512,
        meta,
        splits,
        softmax_scale=scale,
        causal=False,
    )
    return o.squeeze(1)


def _torch_bmm(q, ckv_cache, block_table, seq_lens, scale):
    B, H, _ = q.shape
    P = ckv_cache.shape[1]
    N = block_table.shape[1] * P
    c = ckv_cache[block_table.long()].view(B, N, 576)
    s = torch.bmm(q, c.transpose(1, 2), out_dtype=torch.float32).mul_(scale)  # [B, H, N]
    s.masked_fill_(
        (torch.arange(N, device=q.device)[None, :] >= seq_lens[:, None])[:, None, :], float("-inf")
    )
    return torch.bmm(torch.softmax(s, dim=-1).to(q.dtype), c[..., :512])


def _torch(q, ckv_cache, block_table, seq_lens, scale):
    B, H, _ = q.shape
    P = ckv_cache.shape[1]
    N = block_table.shape[1] * P
    c = ckv_cache[block_table.long()].view(B, 1, N, 576)
    mask = (torch.arange(N, device=q.device)[None, :] < seq_lens[:, None])[:, None, None, :]
    o = F.scaled_dot_product_attention(q.unsqueeze(1), c, c[..., :512], attn_mask=mask, scale=scale)
    return o.squeeze(1)


IMPLS = {
    "flashmla": _flashmla if flash_mla_with_kvcache is not None else None,
    "torch-bmm": _torch_bmm,
    "torch": _torch,
}


_BMM_OK = True  # torch.bmm's float32 out_dtype: CUDA builds of torch >= 2.8


def run(q, ckv_cache, block_table, seq_lens, scale):
    global IMPL, _BMM_OK
    if q.is_cuda and flash_mla_with_kvcache is not None and ckv_cache.shape[1] == 64:
        IMPL = "flashmla"
        return IMPLS[IMPL](q, ckv_cache, block_table, seq_lens, scale)
    if q.is_cuda and _BMM_OK:
        try:
            out = _torch_bmm(q, ckv_cache, block_table, seq_lens, scale)
            IMPL = "torch-bmm"
            return out
        except (RuntimeError, TypeError, NotImplementedError):
            _BMM_OK = False
    IMPL = "torch"
    return _torch(q, ckv_cache, block_table, seq_lens, scale)
