"""moe_align_block_size in plain torch: the canonical layout (rows of each expert in
ascending order, then the sentinels; expert_ids past the padded total are -1). check.py
judges segments as multisets, so only the layout's segment contents matter."""

import torch


def run(topk_ids, num_experts, block_size):
    flat = topk_ids.flatten().long()
    n = flat.numel()
    E, BM = num_experts, block_size
    length = n + E * (BM - 1)
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + BM - 1) // BM * BM
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    order = torch.argsort(flat, stable=True)
    first_of_expert = torch.cumsum(counts, 0) - counts
    experts = flat[order]
    pos = starts[experts] + torch.arange(n, device=flat.device) - first_of_expert[experts]
    sorted_ids = torch.full((length,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[pos] = order.to(torch.int32)
    total = int(ends[-1])
    blocks = (length + BM - 1) // BM
    expert_ids = torch.full((blocks,), -1, dtype=torch.int32, device=flat.device)
    used = total // BM
    expert_ids[:used] = torch.searchsorted(
        ends, torch.arange(used, device=flat.device) * BM, right=True
    ).to(torch.int32)
    return sorted_ids, expert_ids, torch.tensor([total], dtype=torch.int32, device=flat.device)
