"""After vLLM's block-scaled fp8 GEMM (vllm-project/vllm, `_w8a8_block_fp8_matmul` in
vllm/model_executor/layers/quantization/utils/fp8_utils.py, Apache-2.0; SGLang carries the same
kernel): one program per 64 x 128 output tile in groups of 32 tile rows, a K loop over the
128-wide scale blocks, each step's fp8 tl.dot scaled by the activation's per-row scale and the
weight's 128 x 128 block scale before it is accumulated in float32, 4 warps and 3 stages (its
default configuration). Written here for the task's signature; no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _block_fp8_mm(
    a_ptr,
    as_ptr,
    b_ptr,
    bs_ptr,
    y_ptr,
    M,
    N,
    K,
    k_blocks,
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
    for kb in range(0, k_blocks):
        k = kb * BK
        a = tl.load(
            a_ptr + rm[:, None] * K + (k + rk)[None, :],
            mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + rn[None, :] * K + (k + rk)[:, None],
            mask=(rn[None, :] < N) & ((k + rk)[:, None] < K),
            other=0.0,
        )
        a_s = tl.load(as_ptr + rm * k_blocks + kb, mask=rm < M, other=0)
        b_s = tl.load(bs_ptr + (pid_n * BN // 128) * k_blocks + kb)
        acc += tl.dot(a, b) * a_s[:, None] * b_s
    tl.store(
        y_ptr + rm[:, None] * N + rn[None, :],
        acc.to(y_ptr.dtype.element_ty),
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


def run(a, a_scale, b, b_scale):
    M, K = a.shape
    N = b.shape[0]
    y = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 128),)
    _block_fp8_mm[grid](
        a,
        a_scale,
        b,
        b_scale,
        y,
        M,
        N,
        K,
        triton.cdiv(K, 128),
        BM=64,
        BN=128,
        BK=128,
        GROUP_M=32,
        num_warps=4,
        num_stages=3,
    )
    return y
