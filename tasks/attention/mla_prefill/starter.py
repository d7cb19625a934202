"""A portable starting point: FlashAttention-style causal attention over a packed varlen batch
with a query-key head size DQK and a value head size DV (MLA's 192 and 128). One Triton
program per (query block of BLOCK_M tokens, sequence, head); it loops over the key blocks up to
the diagonal with an online softmax (running max m, running sum l, float32 accumulator), bf16
tiles into tl.dot. Correct for any lengths, head counts and head sizes (masked edges; DQK is
padded to a power of two inside the program, 192 to 256); not tuned: fixed tiles, no
pipelining or persistent scheduling, and programs beyond a short sequence's end exit at once."""

import torch
import triton
import triton.language as tl


@triton.jit
def _prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    cu_ptr,
    scale_ptr,
    DQK,
    DV,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_ot,
    stride_oh,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_DQK: tl.constexpr,
    BLOCK_DV: tl.constexpr,
):
    pid_m = tl.program_id(0)
    b = tl.program_id(1)
    h = tl.program_id(2)
    start = tl.load(cu_ptr + b)
    seqlen = tl.load(cu_ptr + b + 1) - start
    m_start = pid_m * BLOCK_M
    if m_start >= seqlen:  # a query block past this sequence's end
        return
    offs_m = m_start + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_DQK)
    d_ok = offs_d < DQK
    offs_v = tl.arange(0, BLOCK_DV)
    v_ok = offs_v < DV
    m_ok = offs_m < seqlen
    q = tl.load(
        q_ptr
        + (start + offs_m)[:, None].to(tl.int64) * stride_qt
        + h * stride_qh
        + offs_d[None, :],
        mask=m_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), dtype=tl.float32)
    qk_scale = tl.load(scale_ptr) * 1.4426950408889634  # exp(x) = exp2(x · log2 e)
    hi = tl.minimum(seqlen, m_start + BLOCK_M)
    for n_start in range(0, hi, BLOCK_N):
        cols = n_start + offs_n
        n_ok = cols < seqlen
        kv_rows = (start + cols)[:, None].to(tl.int64)
        k = tl.load(
            k_ptr + kv_rows * stride_kt + h * stride_kh + offs_d[None, :],
            mask=n_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
        v = tl.load(
            v_ptr + kv_rows * stride_vt + h * stride_vh + offs_v[None, :],
            mask=n_ok[:, None] & v_ok[None, :],
            other=0.0,
        )
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where((cols[None, :] <= offs_m[:, None]) & n_ok[None, :], s, float("-inf"))
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
        + offs_v[None, :],
        acc.to(o_ptr.dtype.element_ty),
        mask=m_ok[:, None] & v_ok[None, :],
    )


def run(q, k, v, cu_seqlens, scale):
    T, H, DQK = q.shape
    DV = v.shape[2]
    B = cu_seqlens.numel() - 1
    o = torch.empty(T, H, DV, dtype=q.dtype, device=q.device)
    max_len = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    gpu = q.device.type != "cpu"
    BLOCK_M, BLOCK_N = (64, 32) if gpu else (32, 32)
    grid = (triton.cdiv(max_len, BLOCK_M), B, H)
    _prefill_kernel[grid](
        q, k, v, o, cu_seqlens, scale, DQK, DV,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), o.stride(0), o.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_DQK=max(16, triton.next_power_of_2(DQK)),
        BLOCK_DV=max(16, triton.next_power_of_2(DV)),
        num_warps=4,
        num_stages=2,
    )  # fmt: skip
    return o
