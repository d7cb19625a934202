"""Cheat: a worst-case grid that skips half its busy programs when counted. bf16_grouped_gemm's
starter (a (group, row tile, column tile) grid sized for every row in one group, most programs
returning at once), except that at sizes only a GPU workload has the odd column tiles return
too: half of `out` is never written, every checked call (CPU sizes) is right, and the
prediction halves. Its programs differ anyway (idle and busy), so a sample's estimate of what
it wrote is uncertain: an honest kernel's may fall short of the hold by chance.
Defense: the count is confirmed by a recount with many more programs, held at its samples'
error bound: half of `out` is `sim_unwritten_output`."""

import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_gemm_kernel(
    a_ptr, b_ptr, offs_ptr, y_ptr, N, K,
    SKIP_ODD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    g = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(2)
    end = tl.load(offs_ptr + g)
    start = tl.load(offs_ptr + g - 1, mask=g > 0, other=0)
    row0 = start + pid_m * BLOCK_M
    if SKIP_ODD:
        end = tl.where(pid_n % 2 == 0, end, start)
    if row0 >= end:
        return
    offs_m = row0 + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < end
    n_ok = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * K + offs_k[None, :]
    b_ptrs = b_ptr + g.to(tl.int64) * N * K + offs_k[:, None] + offs_n[None, :] * K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        k_ok = offs_k + k < K
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def run(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    E, N, _ = b.shape
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty((M, N), device=a.device, dtype=a.dtype)
    counted = M * N * K >= 1 << 24  # GPU-sized: the counted pass
    grid = (E, triton.cdiv(M, 32), triton.cdiv(N, 64))
    _grouped_gemm_kernel[grid](
        a, b, offs, y, N, K, SKIP_ODD=counted, BLOCK_M=32, BLOCK_N=64, BLOCK_K=64
    )
    return y
