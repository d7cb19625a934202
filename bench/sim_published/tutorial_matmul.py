"""After the Triton tutorial's matrix multiplication (triton-lang/triton,
python/tutorials/03-matrix-multiplication.py, MIT): one program per 128 x 256 output tile,
programs ordered in groups of 8 tile rows for L2 reuse, a K loop of 64-wide steps accumulating
in float32, 8 warps and 3 pipeline stages (the first of the tutorial's CUDA configurations,
fixed here rather than autotuned). Written here for y = x · wᵀ; no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _matmul(
    x_ptr,
    w_ptr,
    y_ptr,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = GROUP_M * tiles_n
    first_m = (pid // group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % rows
    pid_n = (pid % group) // rows
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(
            x_ptr + rm[:, None] * K + (k + rk)[None, :],
            mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
            other=0,
        )
        b = tl.load(
            w_ptr + rn[None, :] * K + (k + rk)[:, None],
            mask=(rn[None, :] < N) & ((k + rk)[:, None] < K),
            other=0,
        )
        acc = tl.dot(a, b, acc)
    tl.store(
        y_ptr + rm[:, None] * N + rn[None, :],
        acc.to(y_ptr.dtype.element_ty),
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
    _matmul[grid](x, w, y, M, N, K, BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3)
    return y
