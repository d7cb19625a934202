"""The best torch composition for local paged decode with sinks (vLLM's and FlashInfer's
kernels are not on the measured image; task.yaml's baseline_note): gather only the pages that
hold each sequence's span (ceil(span / P) + 1 pages from page starts // P), then two batched
GEMMs over the G = HQ/HKV query heads of each kv head (torch.bmm with float32 scores on CUDA),
the positions outside [starts, seq_lens) masked, the sink logit appended as one more column of
the softmax and dropped after it, and bfloat16 P times V. No host synchronisation (span is
the caller's window or chunk), so it can be captured in a CUDA graph."""

import math

import torch

IMPL = "torch"
_F32_OUT = True  # torch.bmm's float32 out_dtype: CUDA builds of torch >= 2.8


def _bmm_f32(a, b):
    global _F32_OUT
    if a.is_cuda and _F32_OUT:
        try:
            return torch.bmm(a, b, out_dtype=torch.float32)
        except (RuntimeError, TypeError, NotImplementedError):
            _F32_OUT = False
    return torch.bmm(a.float(), b.float())


def _torch(q, k_cache, v_cache, block_table, seq_lens, starts, sinks, span):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    G, MP = HQ // HKV, block_table.shape[1]
    pages = min((span + P - 1) // P + 1, MP)
    first = (starts.long() // P)[:, None] + torch.arange(pages, device=q.device)[None, :]
    idx = block_table.long().gather(1, first.clamp(max=MP - 1))  # [B, pages]
    N = pages * P
    k = k_cache[idx].view(B, N, HKV, D).permute(0, 2, 3, 1).reshape(B * HKV, D, N)
    v = v_cache[idx].view(B, N, HKV, D).transpose(1, 2).reshape(B * HKV, N, D)
    s = _bmm_f32(q.view(B * HKV, G, D), k).mul_(1.0 / math.sqrt(D)).view(B, HKV, G, N)
    t = (starts.long() // P * P)[:, None] + torch.arange(N, device=q.device)[None, :]
    live = (t >= starts[:, None]) & (t < seq_lens[:, None])  # [B, N]
    s.masked_fill_(~live[:, None, None, :], float("-inf"))
    sink = sinks.float().view(1, HKV, G, 1).expand(B, HKV, G, 1)
    p = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :N]
    o = torch.bmm(p.reshape(B * HKV, G, N).to(q.dtype), v)
    return o.view(B, HQ, D)


IMPLS = {"torch": _torch}


def run(q, k_cache, v_cache, block_table, seq_lens, starts, sinks, span):
    global IMPL
    IMPL = "torch"
    return _torch(q, k_cache, v_cache, block_table, seq_lens, starts, sinks, span)
