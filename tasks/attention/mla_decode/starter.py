"""A portable starting point: one Triton program per (sequence, block of BLOCK_H heads),
walking the context BLOCK_N tokens at a time through the block table (page =
block_table[b, t // P], slot t % P). Scores are the latent part plus the rope part,
tl.dot(q[:, :512], cᵀ[:512]) + tl.dot(q[:, 512:], cᵀ[512:]); the value is the latent part of
the same rows, so each cache row is loaded once per program. Online softmax, float32
accumulator [BLOCK_H, 512]. Lengths are read on the device (CUDA-graph safe). Not tuned: no
split-KV (B·H/BLOCK_H programs), small tiles, and every head block re-reads the cache."""

import torch
import triton
import triton.language as tl


@triton.jit
def _mla_kernel(
    q_ptr,
    c_ptr,
    bt_ptr,
    len_ptr,
    o_ptr,
    scale,
    H,
    P,
    stride_qb,
    stride_qh,
    stride_cp,
    stride_cs,
    stride_bt,
    stride_ob,
    stride_oh,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    b = tl.program_id(0)
    hb = tl.program_id(1)
    n = tl.load(len_ptr + b)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < H
    offs_c = tl.arange(0, 512)
    offs_r = 512 + tl.arange(0, 64)
    offs_n = tl.arange(0, BLOCK_N)
    q_row = q_ptr + b * stride_qb + heads[:, None] * stride_qh
    q_c = tl.load(q_row + offs_c[None, :], mask=h_ok[:, None], other=0.0)
    q_r = tl.load(q_row + offs_r[None, :], mask=h_ok[:, None], other=0.0)
    m_i = tl.full((BLOCK_H,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_H,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_H, 512), dtype=tl.float32)
    qk_scale = scale * 1.4426950408889634
    for t0 in range(0, n, BLOCK_N):
        t = t0 + offs_n
        t_ok = t < n
        page = tl.load(bt_ptr + b * stride_bt + t // P, mask=t_ok, other=0).to(tl.int64)
        row = c_ptr + page[:, None] * stride_cp + (t % P)[:, None] * stride_cs
        c = tl.load(row + offs_c[None, :], mask=t_ok[:, None], other=0.0)  # [BLOCK_N, 512]
        r = tl.load(row + offs_r[None, :], mask=t_ok[:, None], other=0.0)  # [BLOCK_N, 64]
        s = (tl.dot(q_c, tl.trans(c)) + tl.dot(q_r, tl.trans(r))) * qk_scale
        s = tl.where(t_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(
        o_ptr + b * stride_ob + heads[:, None] * stride_oh + offs_c[None, :],
        acc.to(o_ptr.dtype.element_ty),
        mask=h_ok[:, None],
    )


def run(q, ckv_cache, block_table, seq_lens, scale):
    B, H, _ = q.shape
    P = ckv_cache.shape[1]
    o = torch.empty((B, H, 512), device=q.device, dtype=q.dtype)
    BLOCK_H = 16
    BLOCK_N = 32
    _mla_kernel[(B, triton.cdiv(H, BLOCK_H))](
        q,
        ckv_cache,
        block_table,
        seq_lens,
        o,
        float(scale),
        H,
        P,
        q.stride(0),
        q.stride(1),
        ckv_cache.stride(0),
        ckv_cache.stride(1),
        block_table.stride(0),
        o.stride(0),
        o.stride(1),
        BLOCK_H=BLOCK_H,
        BLOCK_N=BLOCK_N,
        num_warps=8,
    )
    return o
