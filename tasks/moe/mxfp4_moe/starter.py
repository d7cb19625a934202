"""A portable starting point in vLLM's structure: align the T·K routed rows by expert in torch
(each expert's rows padded to a multiple of BLOCK_M), then one Triton grouped GEMM kernel that
reads the MXFP4 weights as they are stored, two e2m1 codes per byte and an E8M0 scale per 32,
and decodes them in registers before tl.dot. Launched twice: for W13 (+ bias) it gathers the
token rows of hidden; for W2 (+ bias, × the routing weight) it reads the activation rows. The
clamped SwiGLU and the sum over the K slots are torch ops. Correct for any sizes with H and I
multiples of 32; not tuned (fixed tiles, a host sync for the padded length, float32 per-slot
outputs, no fusion of the activation or the sum, no split-K for decode)."""

import torch
import triton
import triton.language as tl

ALPHA = 1.702


@triton.jit
def _e2m1(code):
    """An e2m1 code (0..15) as float32: sign, 2 exponent bits, 1 mantissa bit."""
    mag = code & 7
    exp = mag >> 1
    man = (mag & 1).to(tl.float32)
    value = tl.where(exp == 0, 0.5 * man, (1.0 + 0.5 * man) * tl.exp2((exp - 1).to(tl.float32)))
    return tl.where(code >= 8, -value, value)


@triton.jit
def _mxfp4_gemm_kernel(
    a_ptr,
    w_ptr,
    s_ptr,
    bias_ptr,
    c_ptr,
    sorted_ptr,
    expert_ptr,
    weight_ptr,
    N,
    KD,
    num_rows,
    a_div,
    stride_am,
    stride_we,
    stride_wn,
    stride_se,
    stride_sn,
    stride_bias,
    stride_cm,
    MUL_WEIGHT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """C[row] = (A[row // a_div] @ dequant(W[e]).T + bias[e]) (× weight[row]) for the BLOCK_M
    sorted rows of this block, all routed to expert e; rows equal to num_rows are padding."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    row_ok = rows < num_rows
    e = tl.load(expert_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    offs_p = tl.arange(0, BLOCK_K // 2)  # packed bytes of a K block
    offs_g = tl.arange(0, BLOCK_K // 32)  # scale groups of a K block
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    a_rows = a_ptr + (rows // a_div).to(tl.int64)[:, None] * stride_am
    w_rows = w_ptr + e * stride_we + offs_n.to(tl.int64)[:, None] * stride_wn
    s_rows = s_ptr + e * stride_se + offs_n.to(tl.int64)[:, None] * stride_sn
    for k in range(0, KD, BLOCK_K):
        k_ok = offs_k + k < KD
        a = tl.load(a_rows + (k + offs_k)[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        p_ok = offs_p + k // 2 < KD // 2
        packed = tl.load(
            w_rows + (k // 2 + offs_p)[None, :], mask=n_ok[:, None] & p_ok[None, :], other=0
        )
        packed = packed.to(tl.int32)
        values = tl.join(_e2m1(packed & 15), _e2m1(packed >> 4))  # [BN, BK/2, 2]: low nibble first
        values = tl.reshape(values, (BLOCK_N, BLOCK_K // 32, 32))
        g_ok = offs_g + k // 32 < KD // 32
        scale = tl.load(
            s_rows + (k // 32 + offs_g)[None, :], mask=n_ok[:, None] & g_ok[None, :], other=127
        )
        factor = tl.exp2(scale.to(tl.float32) - 127.0)
        w = tl.reshape(values * factor[:, :, None], (BLOCK_N, BLOCK_K))
        acc = tl.dot(a, tl.trans(w.to(tl.bfloat16)), acc)
    acc += tl.load(bias_ptr + e * stride_bias + offs_n, mask=n_ok, other=0.0).to(tl.float32)[
        None, :
    ]
    if MUL_WEIGHT:
        acc = acc * tl.load(weight_ptr + rows, mask=row_ok, other=0.0)[:, None]
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & n_ok[None, :])


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


def _gemm(a, w, scale, bias, c, sorted_ids, block_expert, weights, a_div, mul_weight, BM):
    E, N, _ = w.shape
    KD = a.shape[1]
    # the interpreter pays per program and per loop step: bigger tiles on the CPU
    BN, BK = (64, 128) if a.device.type == "cpu" else (64, 64)
    grid = (sorted_ids.numel() // BM, triton.cdiv(N, BN))
    _mxfp4_gemm_kernel[grid](
        a, w, scale, bias, c, sorted_ids, block_expert, weights,
        N, KD, c.shape[0], a_div,
        a.stride(0), w.stride(0), w.stride(1), scale.stride(0), scale.stride(1), bias.stride(0), c.stride(0),
        MUL_WEIGHT=mul_weight, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
    )  # fmt: skip


def run(hidden, topk_ids, topk_weights, w13, w13_scale, b13, w2, w2_scale, b2, swiglu_limit):
    T, H = hidden.shape
    K = topk_ids.shape[1]
    E, inter = w13.shape[0], w2.shape[2] * 2
    hidden = hidden.contiguous()
    weights = topk_weights.contiguous().view(-1)
    BM = 16
    sorted_ids, block_expert, total = _align(topk_ids, E, BM)
    gate_up = torch.empty(T * K, 2 * inter, dtype=hidden.dtype, device=hidden.device)
    y = torch.empty(T * K, H, dtype=torch.float32, device=hidden.device)
    if total:
        _gemm(hidden, w13.contiguous(), w13_scale.contiguous(), b13.contiguous(), gate_up,
              sorted_ids, block_expert, weights, K, False, BM)  # fmt: skip
        gate = gate_up[:, 0::2].float().clamp(max=swiglu_limit)
        up = gate_up[:, 1::2].float().clamp(-swiglu_limit, swiglu_limit)
        h = (gate * torch.sigmoid(ALPHA * gate) * (up + 1)).to(hidden.dtype).contiguous()
        _gemm(h, w2.contiguous(), w2_scale.contiguous(), b2.contiguous(), y,
              sorted_ids, block_expert, weights, 1, True, BM)  # fmt: skip
    return y.view(T, K, H).sum(dim=1).to(hidden.dtype)
