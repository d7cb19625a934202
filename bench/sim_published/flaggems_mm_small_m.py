"""After FlagGems' mm for skinny problems (FlagOpen/FlagGems, src/flag_gems/ops/mm.py,
Apache-2.0: its tuned configurations for small M): one program per 16 x 128 output tile, a
K loop of 128-wide steps accumulating in float32, 4 warps and 4 stages, so a decode-sized GEMM
spreads over N rather than idling on a 128-row tile. Written here for y = x · wᵀ; no code
copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _mm_small_m(x_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(0)
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
    grid = (triton.cdiv(N, 128), triton.cdiv(M, 16))
    _mm_small_m[grid](x, w, y, M, N, K, BM=16, BN=128, BK=128, num_warps=4, num_stages=4)
    return y
