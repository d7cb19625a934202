"""What a serving stack runs for MLA decode: FlashMLA (flash_mla_with_kvcache, the kernel
vLLM and SGLang use on Hopper) if flash_mla imports; otherwise the best torch composition:
gather every sequence's pages (block_table indexes the pool), then one
F.scaled_dot_product_attention call per batch with the H heads as H query rows of a single
head, key = the 576-dim latent+rope rows, value = their first 512 dims, and a boolean length
mask (the memory-efficient backend on NVIDIA and AMD accepts the 576/512 head dims; the CPU
kernel on CPU). No host sync, so it can be captured in a CUDA graph."""

import torch
import torch.nn.functional as F

try:
    from flash_mla import flash_mla_with_kvcache, get_mla_metadata
except Exception:  # noqa: BLE001 - any import failure means "not available"
    flash_mla_with_kvcache = None


def run(q, ckv_cache, block_table, seq_lens, scale):
    B, H, _ = q.shape
    P = ckv_cache.shape[1]
    if q.device.type == "cuda" and flash_mla_with_kvcache is not None and P == 64:
        meta, splits = get_mla_metadata(seq_lens, H, 1)
        o, _ = flash_mla_with_kvcache(
            q.unsqueeze(1), ckv_cache.unsqueeze(2), block_table, seq_lens, 512, meta, splits, softmax_scale=scale, causal=False,
        )
        return o.squeeze(1)
    N = block_table.shape[1] * P
    c = ckv_cache[block_table.long()].view(B, 1, N, 576)
    mask = (torch.arange(N, device=q.device)[None, :] < seq_lens[:, None])[:, None, None, :]
    o = F.scaled_dot_product_attention(q.unsqueeze(1), c, c[..., :512], attn_mask=mask, scale=scale)
    return o.squeeze(1)
