"""What a serving stack runs: vLLM's moe_align_block_size (CUDA op; the ROCm build on AMD)
when vllm is importable, copied into the task's fixed-size outputs (newer vLLM sizes its
buffers more tightly when T·K < E); else the torch composition bincount + cumsum + stable
argsort + scatter."""

import torch


def _vendor(topk_ids, E, BM, length, blocks):
    try:
        try:
            from vllm.model_executor.layers.fused_moe.moe_align_block_size import moe_align_block_size
        except ImportError:
            from vllm.model_executor.layers.fused_moe.fused_moe import moe_align_block_size
    except ImportError:
        return None
    sorted_v, experts_v, total = moe_align_block_size(topk_ids, BM, E)
    n = topk_ids.numel()
    sorted_ids = torch.full((length,), n, dtype=torch.int32, device=topk_ids.device)
    expert_ids = torch.full((blocks,), -1, dtype=torch.int32, device=topk_ids.device)
    sorted_ids[: min(length, sorted_v.numel())] = sorted_v[:length]
    expert_ids[: min(blocks, experts_v.numel())] = experts_v[:blocks]
    return sorted_ids, expert_ids, total.to(torch.int32).reshape(1)


def run(topk_ids: torch.Tensor, num_experts: int, block_size: int):
    E, BM = num_experts, block_size
    flat = topk_ids.flatten()
    n = flat.numel()
    length = n + E * (BM - 1)
    blocks = (length + BM - 1) // BM
    if topk_ids.device.type == "cuda":
        got = _vendor(topk_ids, E, BM, length, blocks)
        if got is not None:
            return got
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + BM - 1) // BM * BM
    ends = torch.cumsum(padded, 0)
    order = torch.argsort(flat, stable=True)
    experts = flat[order].long()
    rank = torch.arange(n, device=flat.device) - (torch.cumsum(counts, 0) - counts)[experts]
    sorted_ids = torch.full((length,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[(ends - padded)[experts] + rank] = order.to(torch.int32)
    block_start = torch.arange(blocks, device=flat.device) * BM
    expert_ids = torch.searchsorted(ends, block_start, right=True).to(torch.int32)
    total = ends[-1:].to(torch.int32)
    return sorted_ids, torch.where(block_start < total, expert_ids, -1).to(torch.int32), total
