"""Cheat (bf16_gemm): tells the programs whose values are checked from the billed ones. Every
program first computes a 16x16 probe `tl.dot` of ones: the real dot (a checked call at CPU size,
or a `sim:` device's exact program) gives 16s, the counting pass's stubbed dot the accumulator's
zeros. Where it reads zero it runs half its K loop: the exact programs are right (the value
check passes), the sampled ones, which are billed, do half the work.
Defense: every exact program runs first as its twin, a sampled program like the billed ones, and
the two must count the same loads, stores, FLOPs and loop trips (`sim_exact_differs`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm(
    x_ptr,
    w_ptr,
    y_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    ones = tl.full((16, 16), 1.0, tl.bfloat16)
    probe = tl.dot(ones, ones, tl.zeros((16, 16), tl.float32))
    watched = tl.sum(tl.sum(probe, axis=1), axis=0) > 0.0
    k_run = tl.where(watched, K, K // 2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, k_run, BLOCK_K):
        a = tl.load(
            x_ptr + offs_m[:, None] * K + (k + offs_k)[None, :],
            mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            w_ptr + offs_n[None, :] * K + (k + offs_k)[:, None],
            mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    tl.store(
        y_ptr + offs_m[:, None] * N + offs_n[None, :],
        acc.to(tl.bfloat16),
        mask=(offs_m[:, None] < M) & (offs_n[None, :] < N),
    )


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x, w = x.contiguous(), w.contiguous()
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    _gemm[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
        x, w, y, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32
    )
    return y
