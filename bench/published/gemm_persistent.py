"""Published-kernel bench set (bench/published/README.md): the Triton tutorial's persistent
matmul, as a candidate for tasks/gemm/bf16_gemm (y = x · wᵀ).

After triton-lang/triton, python/tutorials/09-persistent-matmul.py (MIT), its plain (no TMA)
variant: as many programs as the GPU has SMs, each walking the output tiles with a stride of the
program count (grouped order), a float32 accumulator per tile; fixed 128 x 128 x 64 tiles, four
stages, eight warps where the tile is that large. Rewritten for this task's w [N, K]; no code
copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_persistent(
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
    NUM_PROGRAMS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    start = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    for tile in range(start, tiles_m * tiles_n, NUM_PROGRAMS):
        group = tile // per_group
        first_m = group * GROUP_M
        size_m = min(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % size_m)
        pid_n = (tile % per_group) // size_m
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + rk
            a = tl.load(
                x_ptr + rm[:, None] * stride_xm + ks[None, :] * stride_xk,
                mask=(rm[:, None] < M) & (ks[None, :] < K),
                other=0.0,
            )
            b = tl.load(
                w_ptr + rn[None, :] * stride_wn + ks[:, None] * stride_wk,
                mask=(rn[None, :] < N) & (ks[:, None] < K),
                other=0.0,
            )
            acc = tl.dot(a, b, acc)
        tl.store(
            y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn,
            acc.to(y_ptr.dtype.element_ty),
            mask=(rm[:, None] < M) & (rn[None, :] < N),
        )


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    bm, bn, bk = (128, 128, 64) if x.is_cuda else (32, 32, 32)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    programs = sms  # as the tutorial: one program per SM, whatever the tile count (one compile)
    _matmul_persistent[(programs,)](
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
        NUM_PROGRAMS=programs,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=8,
        num_stages=4 if x.is_cuda else 1,
        num_warps=8 if x.is_cuda else 4,
    )
    return y
