"""After the Triton tutorial's fused attention forward (triton-lang/triton,
python/tutorials/06-fused-attention.py, MIT), for a packed variable-length causal batch with
grouped kv heads: a grid of (128-query block, query head, sequence); each program keeps its
queries' online softmax in float32 over 64-key blocks, first the blocks wholly below the
diagonal without a mask, then the diagonal blocks with the causal mask (the tutorial's two
stages), 8 warps and 3 stages; a query block past its sequence's end returns at once. The
longest sequence, which sizes the grid, is read from cu_seqlens on the host. Written here for
the task's signature; no code copied."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_fwd(
    q_ptr,
    k_ptr,
    v_ptr,
    cu_ptr,
    o_ptr,
    scale,
    HQ,
    HKV,
    D: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
):
    mb = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    start = tl.load(cu_ptr + b).to(tl.int64)
    seq = tl.load(cu_ptr + b + 1).to(tl.int64) - start
    if mb * BM >= seq:
        return
    kvh = h // (HQ // HKV)
    rm = mb * BM + tl.arange(0, BM)
    d = tl.arange(0, D)
    q = tl.load(
        q_ptr + ((start + rm[:, None]) * HQ + h) * D + d[None, :], mask=rm[:, None] < seq, other=0.0
    )
    m_i = tl.full([BM], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    for lo in range(0, mb * BM, BN):  # stage 1: whole blocks below the diagonal
        rn = lo + tl.arange(0, BN)
        k = tl.load(k_ptr + ((start + rn[None, :]) * HKV + kvh) * D + d[:, None])
        s = tl.dot(q, k) * scale
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        v = tl.load(v_ptr + ((start + rn[:, None]) * HKV + kvh) * D + d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        m_i = m_new
    for lo in range(mb * BM, tl.minimum((mb + 1) * BM, seq), BN):  # stage 2: the diagonal
        rn = lo + tl.arange(0, BN)
        k = tl.load(
            k_ptr + ((start + rn[None, :]) * HKV + kvh) * D + d[:, None],
            mask=rn[None, :] < seq,
            other=0.0,
        )
        s = tl.dot(q, k) * scale
        s = tl.where((rn[None, :] <= rm[:, None]) & (rn[None, :] < seq), s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        v = tl.load(
            v_ptr + ((start + rn[:, None]) * HKV + kvh) * D + d[None, :],
            mask=rn[:, None] < seq,
            other=0.0,
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(
        o_ptr + ((start + rm[:, None]) * HQ + h) * D + d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=rm[:, None] < seq,
    )


def run(q, k, v, cu_seqlens):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    B = cu_seqlens.numel() - 1
    longest = int((cu_seqlens[1:] - cu_seqlens[:-1]).max().item())
    o = torch.empty_like(q)
    grid = (triton.cdiv(longest, 128), HQ, B)
    _attn_fwd[grid](
        q,
        k,
        v,
        cu_seqlens,
        o,
        1.0 / math.sqrt(D),
        HQ,
        HKV,
        D=D,
        BM=128,
        BN=64,
        num_warps=8,
        num_stages=3,
    )
    return o
