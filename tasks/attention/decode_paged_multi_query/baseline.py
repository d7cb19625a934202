"""The best torch composition for multi-token paged decode (FlashInfer's
BatchPrefillWithPagedKVCacheWrapper and vLLM's kernels are what serving stacks run; neither is
on the measured image): gather every sequence's pages, then one
F.scaled_dot_product_attention with the Q·G query rows of each kv head (Q tokens times the
G = HQ/HKV heads that share it) and a boolean mask that is causal over the last Q positions
and stops at the length (memory-efficient backend on NVIDIA, the CPU kernel on CPU). No host
sync. `IMPL` names the one the last call used."""

import math

import torch
import torch.nn.functional as F

IMPL = "torch"


def _torch(q, k_cache, v_cache, block_table, seq_lens):
    B, Q, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    N = block_table.shape[1] * P
    idx = block_table.long()
    k = k_cache[idx].view(B, N, HKV, D).transpose(1, 2)  # [B, HKV, N, D]
    v = v_cache[idx].view(B, N, HKV, D).transpose(1, 2)
    rows = q.view(B, Q, HKV, G, D).permute(0, 2, 1, 3, 4).reshape(B, HKV, Q * G, D)
    last = seq_lens[:, None] - Q + torch.arange(Q, device=q.device)[None, :]  # [B, Q]
    mask = torch.arange(N, device=q.device)[None, None, :] <= last[:, :, None]  # [B, Q, N]
    mask = mask.repeat_interleave(G, dim=1)[:, None]  # [B, 1, Q·G, N]
    o = F.scaled_dot_product_attention(rows, k, v, attn_mask=mask, scale=1.0 / math.sqrt(D))
    return o.view(B, HKV, Q, G, D).permute(0, 2, 1, 3, 4).reshape(B, Q, HQ, D)


IMPLS = {"torch": _torch}


def run(q, k_cache, v_cache, block_table, seq_lens):
    global IMPL
    IMPL = "torch"
    return _torch(q, k_cache, v_cache, block_table, seq_lens)
