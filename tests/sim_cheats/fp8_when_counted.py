"""Cheat (quantized shortcut, counted size only): a bf16 GEMM whose tiles are cast to float8
for the dot when the problem is GPU-sized (the counted pass of a `sim:` device; correctness
runs at CPU sizes, where it multiplies in bf16 and passes). The count sees fp8 dots, which the
model bills at twice the bf16 rate; every output is written. On a GPU the same kernel fails
the per-element tolerance (tests/cheats/gemm_fp8.py).
Defense: a counted dot in a dtype narrower than every declared input and output fails the stage
(`sim_narrow_dot`)."""

import torch
import triton
import triton.language as tl

SHORTCUT = True  # False: the same kernel, honest (its twin in tests/test_sim_written.py)


@triton.jit
def _gemm_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wn,
    stride_wk,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    FP8: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # x tile [BLOCK_M, BLOCK_K]; w is [N, K], read as a [BLOCK_K, BLOCK_N] tile of wᵀ.
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        k_ok = offs_k + k < K
        a = tl.load(x_ptrs, mask=(offs_m[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None] & (offs_n[None, :] < N), other=0.0)
        if FP8:
            a, b = a.to(tl.float8e4nv), b.to(tl.float8e4nv)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(
        y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N)
    )


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _gemm_kernel[grid](
        x,
        w,
        y,
        M,
        N,
        K,
        x.stride(0),
        x.stride(1),
        w.stride(0),
        w.stride(1),
        y.stride(0),
        y.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        FP8=SHORTCUT and M * N * K >= 1 << 30,
        num_warps=8,
    )
    return y
