"""A portable starting point: one Triton program per BLOCK_M × BLOCK_N tile of
y = dequant(a) · dequant(b)ᵀ. The K loop steps one 128-wide scale block at a time: it loads the
fp8 tiles, converts them to float16 (exact: every e4m3 value is a float16 value), takes a
float32-accumulated tl.dot, and multiplies the partial product by the row's 1×128 scale and the column's
128×128 scale before accumulating (DeepGEMM's promotion per K block). Correct for any M, N, K
(masked edges, partial last blocks); not tuned (fixed tiles, no fp8 MMA, no split-K, no
pipelining choices). Converting to fp16 keeps it portable: MI300's tensor cores take only
float8_e4m3fnuz, and the Triton 3.6 CPU interpreter has no fp8 dot (and mis-computes a dot of
bf16 tiles converted from fp8, hence fp16)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fp8_blockscale_gemm_kernel(
    a_ptr,
    sa_ptr,
    b_ptr,
    sb_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_sam,
    stride_sak,
    stride_bn,
    stride_bk,
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
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
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
            b_ptr + k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
            mask=k_ok[:, None] & n_ok[None, :],
            other=0.0,
        )
        part = tl.dot(a.to(tl.float16), b.to(tl.float16))
        sa = tl.load(sa_ptr + offs_m * stride_sam + kb * stride_sak, mask=m_ok, other=0.0)
        sb = tl.load(sb_ptr + (offs_n // 128) * stride_sbn + kb * stride_sbk, mask=n_ok, other=0.0)
        acc += part * sa[:, None] * sb[None, :]
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def run(
    a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[0]
    y = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 128  # BLOCK_K is the scale block: one scale per K step
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _fp8_blockscale_gemm_kernel[grid](
        a,
        a_scale,
        b,
        b_scale,
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
        b_scale.stride(0),
        b_scale.stride(1),
        y.stride(0),
        y.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
    )
    return y
