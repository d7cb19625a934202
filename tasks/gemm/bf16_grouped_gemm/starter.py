"""A portable starting point: a 3-D grid (group, row tile, column tile); each program reads
its group's row range from offs, returns at once if its row tile lies past the group's end,
else computes a BLOCK_M × BLOCK_N tile of a[rows] · b[g]ᵀ with bf16 tiles and a float32
accumulator. Correct for any group sizes, empty groups included; not tuned: the grid is
sized for the worst case (every row in one group), so most programs exit at once, and there
is no persistent scheduler over the non-empty tiles."""

import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_gemm_kernel(
    a_ptr,
    b_ptr,
    offs_ptr,
    y_ptr,
    N,
    K,
    stride_am,
    stride_ak,
    stride_be,
    stride_bn,
    stride_bk,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    g = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(2)
    end = tl.load(offs_ptr + g)
    start = tl.load(offs_ptr + g - 1, mask=g > 0, other=0)
    row0 = start + pid_m * BLOCK_M
    if row0 >= end:
        return
    offs_m = row0 + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < end
    n_ok = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = (
        b_ptr
        + g.to(tl.int64) * stride_be
        + offs_k[:, None] * stride_bk
        + offs_n[None, :] * stride_bn
    )
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        k_ok = offs_k + k < K
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def run(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    E, N, _ = b.shape
    y = torch.empty((M, N), device=a.device, dtype=a.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 64
    grid = (E, triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _grouped_gemm_kernel[grid](
        a,
        b,
        offs,
        y,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        b.stride(2),
        y.stride(0),
        y.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
    )
    return y
