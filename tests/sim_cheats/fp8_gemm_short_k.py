"""Cheat (fp8_blockscale_gemm, a task judged by its own check.py): GPU-sized (the counted pass),
its K loop stops at 85% of the blocks, within the formulas' 80% margin; every checked call, at
CPU sizes, is exact. A check.py task's counted values used not to be compared at all.
Defense: a check.py that judges every element on its own says so (`ELEMENTWISE = True`), and the
counted call's known elements, set into the reference, are judged by it (core/harness/sim/
hybrid.py): `sim_wrong_output`."""

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
    K_BLOCKS,
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
    for kb in range(0, K_BLOCKS):
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
    k_blocks = triton.cdiv(K, BLOCK_K)
    if M * N * K >= 1 << 26:  # GPU-sized: the counted pass (CPU workloads stay under 2^23)
        k_blocks = k_blocks * 85 // 100
    _fp8_blockscale_gemm_kernel[grid](
        a,
        a_scale,
        b,
        b_scale,
        y,
        M,
        N,
        K,
        k_blocks,
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
