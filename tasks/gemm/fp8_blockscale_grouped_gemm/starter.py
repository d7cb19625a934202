"""A portable starting point: one Triton program per BLOCK_M (64) rows × BLOCK_N columns; the
program reads its 128-row block's expert from m_indices (the block's first row is always a
real row), then runs the K loop of gemm/fp8_blockscale_gemm's starter against that expert's
weight: fp8 tiles converted to float16 (exact), a float32-accumulated tl.dot per 128-wide
scale block, times the row scales and the expert's 128×128 block scales. Padding rows are
computed like real ones (their output is free). Correct for any layout that keeps the
contract; not tuned (no fp8 MMA, fixed tiles, no skipping of padding, no persistent
scheduling). fp16, not bf16 or fp8, because MI300 takes only float8_e4m3fnuz and the Triton
3.6 CPU interpreter has no fp8 dot."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fp8_grouped_kernel(
    a_ptr,
    sa_ptr,
    b_ptr,
    sb_ptr,
    m_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_sam,
    stride_sak,
    stride_be,
    stride_bn,
    stride_bk,
    stride_sbe,
    stride_sbn,
    stride_sbk,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    row0 = pid_m * BLOCK_M
    e = tl.load(m_ptr + (row0 // 128) * 128).to(tl.int64)  # the 128-row block's expert
    offs_m = row0 + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        k = kb * BLOCK_K + offs_k
        k_ok = k < K
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
            mask=m_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        b = tl.load(
            b_ptr + e * stride_be + k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
            mask=k_ok[:, None] & n_ok[None, :],
            other=0.0,
        )
        part = tl.dot(a.to(tl.float16), b.to(tl.float16))
        sa = tl.load(sa_ptr + offs_m * stride_sam + kb * stride_sak, mask=m_ok, other=0.0)
        sb = tl.load(
            sb_ptr + e * stride_sbe + (offs_n // 128) * stride_sbn + kb * stride_sbk,
            mask=n_ok,
            other=0.0,
        )
        acc += part * sa[:, None] * sb[None, :]
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def run(a, a_scale, b, b_scale, m_indices):
    M, K = a.shape
    E, N, _ = b.shape
    y = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 128  # BLOCK_M divides 128; BLOCK_K is the scale block
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _fp8_grouped_kernel[grid](
        a,
        a_scale,
        b,
        b_scale,
        m_indices,
        y,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        a_scale.stride(0),
        a_scale.stride(1),
        b.stride(0),
        b.stride(1),
        b.stride(2),
        b_scale.stride(0),
        b_scale.stride(1),
        b_scale.stride(2),
        y.stride(0),
        y.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
    )
    return y
