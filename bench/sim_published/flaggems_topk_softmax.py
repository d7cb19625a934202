"""After FlagGems' topk_softmax (FlagOpen/FlagGems, src/flag_gems/fused/topk_softmax.py,
Apache-2.0), the Triton stand-in for vLLM's topk_softmax CUDA op: one program per token row
loads its E logits, takes the softmax in float32, then picks the K largest by K rounds of
argmax (ties to the lower expert), masking each pick, and renormalises the chosen weights.
Written here for the task's signature; no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _topk_softmax(
    x_ptr, w_ptr, ids_ptr, n_experts, K: tl.constexpr, KP: tl.constexpr, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    e = tl.arange(0, BLOCK)
    keep = e < n_experts
    x = tl.load(x_ptr + row * n_experts + e, mask=keep, other=-float("inf")).to(tl.float32)
    p = tl.exp(x - tl.max(x, axis=0))
    p = tl.where(keep, p, 0.0)
    p = p / tl.sum(p, axis=0)
    slot = tl.arange(0, KP)
    ids = tl.zeros([KP], dtype=tl.int32)
    ws = tl.zeros([KP], dtype=tl.float32)
    left = tl.where(keep, p, -1.0)
    for i in tl.static_range(K):
        best = tl.max(left, axis=0)
        idx = tl.min(tl.where(left == best, e, BLOCK), axis=0)
        ids = tl.where(slot == i, idx, ids)
        ws = tl.where(slot == i, best, ws)
        left = tl.where(e == idx, -1.0, left)
    total = tl.sum(ws, axis=0)
    tl.store(ids_ptr + row * K + slot, ids, mask=slot < K)
    tl.store(w_ptr + row * K + slot, ws / total, mask=slot < K)


def run(router_logits: torch.Tensor, top_k: int):
    T, E = router_logits.shape
    weights = torch.empty((T, top_k), dtype=torch.float32, device=router_logits.device)
    ids = torch.empty((T, top_k), dtype=torch.int32, device=router_logits.device)
    _topk_softmax[(T,)](
        router_logits,
        weights,
        ids,
        E,
        K=top_k,
        KP=triton.next_power_of_2(top_k),
        BLOCK=triton.next_power_of_2(E),
        num_warps=1,
    )
    return weights, ids
