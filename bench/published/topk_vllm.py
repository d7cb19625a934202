"""Published-kernel bench set (bench/published/README.md): softmax top-k routing as vLLM's
topk_softmax computes it, as a candidate for tasks/moe/route_topk_softmax.

After vllm-project/vllm, csrc/moe/topk_softmax_kernels.cu (Apache-2.0): the softmax of the
whole row first (max, exp, sum in float32), then K rounds of argmax over the probabilities
(ties to the lowest expert), each chosen probability renormalised by the chosen ones' sum.
vLLM does this with a warp per row in CUDA; here one Triton program per row. No code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_topk_row(
    x_ptr,
    w_ptr,
    id_ptr,
    E,
    stride_x,
    stride_w,
    stride_id,
    K: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_E)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < E, other=float("-inf"))
    p = tl.exp(x - tl.max(x, axis=0))
    p = p / tl.sum(p, axis=0)
    p = tl.where(cols < E, p, -1.0)
    slots = tl.arange(0, BLOCK_K)
    w = tl.zeros((BLOCK_K,), dtype=tl.float32)
    ids = tl.zeros((BLOCK_K,), dtype=tl.int32)
    for j in range(K):
        best = tl.max(p, axis=0)
        best_id = tl.min(tl.where(p == best, cols, BLOCK_E), axis=0)
        w = tl.where(slots == j, best, w)
        ids = tl.where(slots == j, best_id, ids)
        p = tl.where(cols == best_id, -1.0, p)
    w = w / tl.sum(w, axis=0)
    keep = slots < K
    tl.store(w_ptr + row * stride_w + slots, w, mask=keep)
    tl.store(id_ptr + row * stride_id + slots, ids, mask=keep)


def run(router_logits: torch.Tensor, top_k: int):
    x = router_logits.contiguous()
    T, E = x.shape
    weights = torch.empty((T, top_k), device=x.device, dtype=torch.float32)
    ids = torch.empty((T, top_k), device=x.device, dtype=torch.int32)
    if T:
        _softmax_topk_row[(T,)](
            x,
            weights,
            ids,
            E,
            x.stride(0),
            weights.stride(0),
            ids.stride(0),
            K=top_k,
            BLOCK_E=triton.next_power_of_2(E),
            BLOCK_K=triton.next_power_of_2(top_k),
        )
    return weights, ids
