"""Published-kernel bench set (bench/published/README.md): the Triton tutorial's matmul, as a
candidate for tasks/gemm/bf16_gemm (y = x · wᵀ).

After triton-lang/triton, python/tutorials/03-matrix-multiplication.py (MIT): one program per
BLOCK_M × BLOCK_N tile in grouped order (GROUP_SIZE_M rows of tiles share their columns in
L2), a float32 accumulator over K in BLOCK_K steps, the tile shape, stages and warps chosen by
@triton.autotune over the tutorial's eight CUDA configurations (key: M, N, K). Rewritten for
this task's w [N, K] (read transposed through its strides); no code copied."""

import torch
import triton
import triton.language as tl


def _configs():
    shapes = [
        (128, 256, 64, 3, 8),
        (64, 256, 32, 4, 4),
        (128, 128, 32, 4, 4),
        (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4),
        (128, 32, 32, 4, 4),
        (64, 32, 32, 5, 2),
        (32, 64, 32, 5, 2),
    ]
    return [
        triton.Config(
            {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_SIZE_M": 8}, num_stages=s, num_warps=w
        )
        for m, n, k, s, w in shapes
    ]


@triton.autotune(configs=_configs(), key=["M", "N", "K"])
@triton.jit
def _matmul_grouped(
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
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_SIZE_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_SIZE_M
    size_m = min(tiles_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
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

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _matmul_grouped[grid](
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
    )
    return y
