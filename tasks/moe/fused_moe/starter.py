"""A portable starting point in vLLM's structure: align the T·K routed rows by expert in torch
(each expert's rows padded to a multiple of BLOCK_M, so every BLOCK_M-row block belongs to one
expert), then one Triton grouped GEMM kernel, launched twice: for W13 it gathers the token
rows of hidden through the sorted row ids, for W2 it reads the silu·up rows and multiplies by
the routing weight; silu·up and the final sum over the K slots are torch ops. Correct for
any sizes; not tuned (fixed tiles, a host sync for the padded length, float32 per-slot
outputs, no fusion of the activation or of the sum, no split-K for decode)."""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _expert_gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    sorted_ptr,
    expert_ptr,
    weight_ptr,
    N,
    KD,
    num_rows,
    a_div,
    stride_am,
    stride_be,
    stride_bn,
    stride_cm,
    MUL_WEIGHT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """C[row] = A[row // a_div] @ B[e].T (× weight[row]) for the BLOCK_M sorted rows of this
    block, all routed to expert e; rows equal to num_rows are padding."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    row_ok = rows < num_rows
    e = tl.load(expert_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows // a_div).to(tl.int64)[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + e * stride_be + offs_n[None, :].to(tl.int64) * stride_bn + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, KD, BLOCK_K):
        k_ok = offs_k + k < KD
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    if MUL_WEIGHT:
        acc = acc * tl.load(weight_ptr + rows, mask=row_ok, other=0.0)[:, None]
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & (offs_n[None, :] < N))


def _align(topk_ids, E, BM):
    """Rows t·K + j sorted by expert, each expert's run padded to a multiple of BM with the
    sentinel T·K; the expert of every BM-row block; the padded length."""
    flat = topk_ids.flatten()
    n = flat.numel()
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + BM - 1) // BM * BM
    ends = torch.cumsum(padded, 0)
    total = int(ends[-1])  # host sync: fine for a starter
    order = torch.argsort(flat, stable=True)
    experts = flat[order].long()
    rank = torch.arange(n, device=flat.device) - (torch.cumsum(counts, 0) - counts)[experts]
    sorted_ids = torch.full((total,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[(ends - padded)[experts] + rank] = order.to(torch.int32)
    block_expert = torch.searchsorted(
        ends, torch.arange(total // BM, device=flat.device) * BM, right=True
    )
    return sorted_ids, block_expert.to(torch.int32), total


def _expert_gemm(a, b, c, sorted_ids, block_expert, weights, a_div, mul_weight, BM):
    E, N, KD = b.shape
    # the interpreter pays per program and per loop step: bigger tiles on the CPU
    BN, BK = (128, 128) if a.device.type == "cpu" else (64, 32)
    grid = (sorted_ids.numel() // BM, triton.cdiv(N, BN))
    _expert_gemm_kernel[grid](
        a,
        b,
        c,
        sorted_ids,
        block_expert,
        weights,
        N,
        KD,
        c.shape[0],
        a_div,
        a.stride(0),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        MUL_WEIGHT=mul_weight,
        BLOCK_M=BM,
        BLOCK_N=BN,
        BLOCK_K=BK,
    )


def run(hidden, topk_ids, topk_weights, w13, w2):
    T, H = hidden.shape
    K = topk_ids.shape[1]
    E, inter = w13.shape[0], w2.shape[2]
    hidden, w13, w2 = hidden.contiguous(), w13.contiguous(), w2.contiguous()
    weights = topk_weights.contiguous().view(-1)
    BM = 16
    sorted_ids, block_expert, total = _align(topk_ids, E, BM)
    gate_up = torch.empty(T * K, 2 * inter, dtype=hidden.dtype, device=hidden.device)
    y = torch.empty(T * K, H, dtype=torch.float32, device=hidden.device)
    if total:
        _expert_gemm(hidden, w13, gate_up, sorted_ids, block_expert, weights, K, False, BM)
        h = (F.silu(gate_up[:, :inter].float()) * gate_up[:, inter:].float()).to(hidden.dtype)
        _expert_gemm(h, w2, y, sorted_ids, block_expert, weights, 1, True, BM)
    return y.view(T, K, H).sum(dim=1).to(hidden.dtype)
