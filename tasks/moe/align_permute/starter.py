"""A portable starting point, four small Triton kernels as vLLM's moe_align_block_size is
built: (1) a histogram of the routed rows per expert with atomic adds, (2) one program that
pads the counts to multiples of BM and prefix-sums them (segment starts, the padded total),
(3) one program per block that finds its expert by comparing with the segment ends, and
(4) a scatter where every row takes its slot with an atomic increment of its expert's cursor
(so the order within a segment is whatever the atomics give). Correct for any sizes with
E ≤ 4096; not tuned (global atomics, no shared-memory histogram, four launches)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    e = tl.load(ids_ptr + offs, mask=mask, other=0)
    tl.atomic_add(counts_ptr + e, 1, mask=mask)


@triton.jit
def _offsets_kernel(counts_ptr, cursor_ptr, ends_ptr, total_ptr, E, BM, BLOCK_E: tl.constexpr):
    e = tl.arange(0, BLOCK_E)
    counts = tl.load(counts_ptr + e, mask=e < E, other=0)
    padded = (counts + BM - 1) // BM * BM
    ends = tl.cumsum(padded, axis=0)
    tl.store(cursor_ptr + e, ends - padded, mask=e < E)
    tl.store(ends_ptr + e, ends, mask=e < E)
    tl.store(total_ptr, tl.sum(padded, axis=0))


@triton.jit
def _expert_ids_kernel(ends_ptr, total_ptr, expert_ids_ptr, E, BM, BLOCK_E: tl.constexpr):
    b = tl.program_id(0)
    e = tl.arange(0, BLOCK_E)
    ends = tl.load(ends_ptr + e, mask=e < E, other=2147483647)
    expert = tl.sum(
        (ends <= b * BM).to(tl.int32), axis=0
    )  # segments that end at or before the block
    total = tl.load(total_ptr)
    tl.store(expert_ids_ptr + b, tl.where(b * BM < total, expert, -1))


@triton.jit
def _scatter_kernel(ids_ptr, cursor_ptr, sorted_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    e = tl.load(ids_ptr + offs, mask=mask, other=0)
    slot = tl.atomic_add(cursor_ptr + e, 1, mask=mask)
    tl.store(sorted_ptr + slot, offs, mask=mask)


def run(topk_ids: torch.Tensor, num_experts: int, block_size: int):
    ids = topk_ids.contiguous().view(-1)
    n, E, BM = ids.numel(), num_experts, block_size
    dev = ids.device
    length = n + E * (BM - 1)
    blocks = triton.cdiv(length, BM)
    sorted_ids = torch.full((length,), n, dtype=torch.int32, device=dev)  # the sentinel everywhere
    expert_ids = torch.empty((blocks,), dtype=torch.int32, device=dev)
    total = torch.empty((1,), dtype=torch.int32, device=dev)
    counts = torch.zeros((E,), dtype=torch.int32, device=dev)
    cursor = torch.empty((E,), dtype=torch.int32, device=dev)
    ends = torch.empty((E,), dtype=torch.int32, device=dev)
    BLOCK, BLOCK_E = 256, triton.next_power_of_2(E)
    _count_kernel[(triton.cdiv(n, BLOCK),)](ids, counts, n, BLOCK=BLOCK)
    _offsets_kernel[(1,)](counts, cursor, ends, total, E, BM, BLOCK_E=BLOCK_E)
    _expert_ids_kernel[(blocks,)](ends, total, expert_ids, E, BM, BLOCK_E=BLOCK_E)
    _scatter_kernel[(triton.cdiv(n, BLOCK),)](ids, cursor, sorted_ids, n, BLOCK=BLOCK)
    return sorted_ids, expert_ids, total
