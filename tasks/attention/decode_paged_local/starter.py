"""A portable starting point: one Triton program per (sequence, kv head) that handles all
G = HQ/HKV query heads of that kv head at once (a BLOCK_G ≥ 16 row tile, so tl.dot applies),
walking the sequence's span starts[b] .. seq_lens[b] − 1 BLOCK_N tokens at a time: each
token's page comes from the block table (page = block_table[b, t // P], slot t % P). Online
softmax with a float32 accumulator; the sink joins the denominator at the end. Reads the
lengths on the device (no host sync; CUDA-graph safe). Not tuned: no split-KV (B·HKV programs
only), gathers token by token instead of whole pages, no pipelining."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    bt_ptr,
    len_ptr,
    start_ptr,
    sink_ptr,
    o_ptr,
    scale,
    D,
    P,
    stride_qb,
    stride_qh,
    stride_kp,
    stride_ks,
    stride_kh,
    stride_vp,
    stride_vs,
    stride_vh,
    stride_bt,
    stride_ob,
    stride_oh,
    G: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    n = tl.load(len_ptr + b)
    first = tl.load(start_ptr + b)
    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    g_ok = offs_g < G
    d_ok = offs_d < D
    heads = kvh * G + offs_g
    q = tl.load(
        q_ptr + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
        mask=g_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    m_i = tl.full((BLOCK_G,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, BLOCK_D), dtype=tl.float32)
    qk_scale = scale * 1.4426950408889634
    for t0 in range(first, n, BLOCK_N):
        t = t0 + offs_n
        t_ok = t < n
        page = tl.load(bt_ptr + b * stride_bt + t // P, mask=t_ok, other=0).to(tl.int64)
        slot = t % P
        kv_mask = t_ok[:, None] & d_ok[None, :]
        k = tl.load(
            k_ptr
            + page[:, None] * stride_kp
            + slot[:, None] * stride_ks
            + kvh * stride_kh
            + offs_d[None, :],
            mask=kv_mask,
            other=0.0,
        )
        v = tl.load(
            v_ptr
            + page[:, None] * stride_vp
            + slot[:, None] * stride_vs
            + kvh * stride_vh
            + offs_d[None, :],
            mask=kv_mask,
            other=0.0,
        )
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(t_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    sink = tl.load(sink_ptr + heads, mask=g_ok, other=float("-inf")) * 1.4426950408889634
    acc = acc / (l_i + tl.exp2(sink - m_i))[:, None]
    tl.store(
        o_ptr + b * stride_ob + heads[:, None] * stride_oh + offs_d[None, :],
        acc.to(o_ptr.dtype.element_ty),
        mask=g_ok[:, None] & d_ok[None, :],
    )


def run(q, k_cache, v_cache, block_table, seq_lens, starts, sinks, span):
    B, HQ, D = q.shape
    P, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    o = torch.empty_like(q)
    BLOCK_N = 64 if q.device.type != "cpu" else 32
    _decode_kernel[(B, HKV)](
        q,
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        starts,
        sinks.contiguous(),
        o,
        1.0 / math.sqrt(D),
        D,
        P,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        block_table.stride(0),
        o.stride(0),
        o.stride(1),
        G=G,
        BLOCK_G=max(16, triton.next_power_of_2(G)),
        BLOCK_N=BLOCK_N,
        BLOCK_D=max(16, triton.next_power_of_2(D)),
    )
    return o
