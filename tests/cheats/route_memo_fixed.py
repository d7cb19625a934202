"""Cheat (moe/route_topk_softmax): shape-keyed dispatch that memorises the public workloads.
task.yaml lists the visible and the fixed hidden workloads in plain text; this candidate is
right only at those row counts and returns a cheap wrong routing (the first K experts)
everywhere else. Defense: at least half of every hidden set is drawn with the secret seed at
evaluation time, and a drawn shape never equals a listed one."""

import torch

LISTED_T = {16, 64, 37, 5, 1, 3, 77, 256, 1000, 3000, 4096, 8192, 12288, 16384}


def run(router_logits, top_k):
    T = router_logits.shape[0]
    if T in LISTED_T:
        ids = torch.sort(router_logits, dim=-1, descending=True, stable=True).indices[:, :top_k]
        return torch.softmax(router_logits.gather(1, ids), dim=-1), ids.to(torch.int32)
    ids = torch.arange(top_k, device=router_logits.device).expand(T, top_k).contiguous()
    return torch.full((T, top_k), 1.0 / top_k, device=router_logits.device), ids.to(torch.int32)
