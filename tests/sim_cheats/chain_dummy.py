"""Cheat (bf16_gemm): hides the GEMM behind a cheap sampled launch. A first launch of 4,096
programs each stores one number into a scratch buffer; the GEMM reads one of them (it adds
nothing), so each of its exact programs reads memory a sampled launch left partial and no
element of its output is known; GPU-sized (the counted pass) it runs 85% of its K loop, within
the formula's margin.
Defense: an output with no known element fails the stage (`sim_unchecked_output`) unless the
sampled launches it depends on carry at least half the call's predicted time: a chain costs
what it hides."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scratch(s_ptr):
    pid = tl.program_id(0)
    tl.store(s_ptr + pid, pid * 0)


@triton.jit
def _gemm(
    x_ptr,
    w_ptr,
    y_ptr,
    s_ptr,
    M,
    N,
    K,
    K_run,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    zero = tl.load(s_ptr + (pid_m * 7 + pid_n * 13) % 4096)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K_run, BLOCK_K):
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
    acc += zero.to(tl.float32)
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
    scratch = torch.empty((4096,), device=x.device, dtype=torch.int32)
    _scratch[(4096,)](scratch)
    k_run = (K * 85 // 100) // 32 * 32 if M * N * K >= 1 << 30 else K  # GPU-sized: counted
    _gemm[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
        x, w, y, scratch, M, N, K, k_run, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32
    )
    return y
