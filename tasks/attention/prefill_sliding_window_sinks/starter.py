"""A portable starting point: FlashAttention-style sliding-window attention with sinks over a
packed varlen batch. One Triton program per (query block of BLOCK_M tokens, sequence, query
head); it loops only over the key blocks that intersect the window [i - window + 1, i] of its
queries. The sink enters as a virtual key with logit sinks[h] and value zero: the online
softmax starts at m = sink, l = 1, acc = 0, so it lands in the denominator only. bf16 tiles
into tl.dot, float32 softmax state. Correct for any lengths, heads, head size and window; not
tuned: fixed tiles, one query head per program (GQA K/V re-read by each head of a group), no
pipelining, and the diagonal and window-edge blocks are masked element by element."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _swa_sink_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    cu_ptr,
    sink_ptr,
    scale,
    D,
    window,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_ot,
    stride_oh,
    GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    b = tl.program_id(1)
    h = tl.program_id(2)
    start = tl.load(cu_ptr + b)
    seqlen = tl.load(cu_ptr + b + 1) - start
    m_start = pid_m * BLOCK_M
    if m_start >= seqlen:  # a query block past this sequence's end
        return
    kvh = h // GROUP
    offs_m = m_start + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    m_ok = offs_m < seqlen
    q = tl.load(
        q_ptr
        + (start + offs_m)[:, None].to(tl.int64) * stride_qt
        + h * stride_qh
        + offs_d[None, :],
        mask=m_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x · log2 e)
    sink = tl.load(sink_ptr + h).to(tl.float32) * 1.4426950408889634
    m_i = (
        tl.zeros((BLOCK_M,), dtype=tl.float32) + sink
    )  # the sink: a key of logit sinks[h], value 0
    l_i = tl.full((BLOCK_M,), 1.0, dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    hi = tl.minimum(seqlen, m_start + BLOCK_M)
    lo = tl.maximum(0, m_start - window + 1) // BLOCK_N * BLOCK_N
    for n_start in range(lo, hi, BLOCK_N):
        cols = n_start + offs_n
        n_ok = cols < seqlen
        kv_rows = (start + cols)[:, None].to(tl.int64)
        k = tl.load(
            k_ptr + kv_rows * stride_kt + kvh * stride_kh + offs_d[None, :],
            mask=n_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
        v = tl.load(
            v_ptr + kv_rows * stride_vt + kvh * stride_vh + offs_d[None, :],
            mask=n_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
        s = tl.dot(q, tl.trans(k)) * qk_scale
        in_window = (cols[None, :] <= offs_m[:, None]) & (cols[None, :] > offs_m[:, None] - window)
        s = tl.where(in_window & n_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(
        o_ptr
        + (start + offs_m)[:, None].to(tl.int64) * stride_ot
        + h * stride_oh
        + offs_d[None, :],
        acc.to(o_ptr.dtype.element_ty),
        mask=m_ok[:, None] & d_ok[None, :],
    )


def run(q, k, v, sinks, cu_seqlens, window):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    B = cu_seqlens.numel() - 1
    o = torch.empty_like(q)
    max_len = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    gpu = q.device.type != "cpu"
    BLOCK_M, BLOCK_N = (64, 64) if gpu else (32, 32)
    BLOCK_D = max(16, triton.next_power_of_2(D))
    grid = (triton.cdiv(max_len, BLOCK_M), B, HQ)
    _swa_sink_kernel[grid](
        q,
        k,
        v,
        o,
        cu_seqlens,
        sinks,
        1.0 / math.sqrt(D),
        D,
        int(window),
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        o.stride(0),
        o.stride(1),
        GROUP=HQ // HKV,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_D=BLOCK_D,
        num_warps=4,
        num_stages=2,
    )
    return o
