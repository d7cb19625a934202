"""After SGLang's grouped decode attention (sgl-project/sglang,
python/sglang/srt/layers/attention/triton_ops/decode_attention.py, `_fwd_grouped_kernel_stage1`
and `_fwd_kernel_stage2`, Apache-2.0; vLLM carries the same design): two launches. Stage 1: a
grid of (sequence, group of up to 16 query heads sharing a kv head, one of 8 splits of the
sequence); each program walks its split's tokens 64 at a time through the page table, scores
them against its heads with tl.dot, keeps an online softmax in float32 and writes its partial
output and log-sum-exp. Stage 2: one program per (sequence, head) merges the splits. 4 warps,
2 stages. Written here for the task's signature; no code copied."""

import math

import torch
import triton
import triton.language as tl

SPLITS = 8
BLOCK_H = 16
BLOCK_N = 64


@triton.jit
def _stage1(
    q_ptr,
    k_ptr,
    v_ptr,
    table_ptr,
    lens_ptr,
    part_ptr,
    lse_ptr,
    scale,
    n_pages_max,
    HQ,
    HKV,
    G,
    VALID_H,
    P,
    D: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLITS: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    hid = tl.program_id(1)
    split = tl.program_id(2)
    first = hid * VALID_H
    heads = first + tl.arange(0, BLOCK_H)
    h_ok = (heads < first + VALID_H) & (heads < HQ)
    kvh = first // G
    d = tl.arange(0, D)
    q = tl.load(q_ptr + (b * HQ + heads[:, None]) * D + d[None, :], mask=h_ok[:, None], other=0.0)
    n = tl.load(lens_ptr + b)
    per = tl.cdiv(n, SPLITS)
    lo = split * per
    hi = tl.minimum(lo + per, n)
    m_i = tl.full([BLOCK_H], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, D], dtype=tl.float32)
    for start in range(lo, hi, BLOCK_N):
        t = start + tl.arange(0, BLOCK_N)
        t_ok = t < hi
        page = tl.load(table_ptr + b * n_pages_max + t // P, mask=t_ok, other=0).to(tl.int64)
        row = (page * P + t % P) * HKV + kvh
        k = tl.load(k_ptr + row[None, :] * D + d[:, None], mask=t_ok[None, :], other=0.0)
        s = tl.dot(q, k) * scale
        s = tl.where(h_ok[:, None] & t_ok[None, :], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        v = tl.load(v_ptr + row[:, None] * D + d[None, :], mask=t_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    base = (b * HQ + heads) * SPLITS + split
    tl.store(part_ptr + base[:, None] * D + d[None, :], out, mask=h_ok[:, None])
    tl.store(lse_ptr + base, tl.where(l_i > 0, m_i + tl.log(l_i), -float("inf")), mask=h_ok)


@triton.jit
def _stage2(part_ptr, lse_ptr, o_ptr, HQ, D: tl.constexpr, SPLITS: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    s = tl.arange(0, SPLITS)
    d = tl.arange(0, D)
    base = (b * HQ + h) * SPLITS
    lse = tl.load(lse_ptr + base + s)
    top = tl.max(lse, axis=0)
    w = tl.where(lse > -float("inf"), tl.exp(lse - top), 0.0)
    parts = tl.load(part_ptr + (base + s)[:, None] * D + d[None, :])
    total = tl.sum(w, axis=0)
    o = tl.sum(parts * w[:, None], axis=0) / tl.where(total > 0, total, 1.0)
    tl.store(o_ptr + (b * HQ + h) * D + d, o.to(o_ptr.dtype.element_ty))


def run(q, k_cache, v_cache, block_table, seq_lens):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    valid = min(BLOCK_H, G)
    part = torch.empty((B, HQ, SPLITS, D), dtype=torch.float32, device=q.device)
    lse = torch.empty((B, HQ, SPLITS), dtype=torch.float32, device=q.device)
    _stage1[(B, triton.cdiv(HQ, valid), SPLITS)](
        q,
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        part,
        lse,
        1.0 / math.sqrt(D),
        block_table.shape[1],
        HQ,
        HKV,
        G,
        valid,
        P,
        D=D,
        BLOCK_H=BLOCK_H,
        BLOCK_N=BLOCK_N,
        SPLITS=SPLITS,
        num_warps=4,
        num_stages=2,
    )
    o = torch.empty_like(q)
    _stage2[(B, HQ)](part, lse, o, HQ, D=D, SPLITS=SPLITS, num_warps=4)
    return o
