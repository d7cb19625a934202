"""DeepSeek-V3 / Kimi-K2 group-limited sigmoid routing in float64. Stable sorts make every
tie go to the lowest index (groups and experts). Ids in descending selection score."""

import torch


def run(router_logits, e_score_correction_bias, top_k, n_group, topk_group, routed_scaling_factor):
    x = router_logits.double()
    T, E = x.shape
    s = torch.sigmoid(x)
    c = s + e_score_correction_bias.double()
    group_scores = c.view(T, n_group, E // n_group).topk(2, dim=-1).values.sum(-1)
    kept = torch.sort(group_scores, dim=-1, descending=True, stable=True).indices[:, :topk_group]
    group_mask = torch.zeros(T, n_group, dtype=torch.bool, device=x.device).scatter_(1, kept, True)
    expert_mask = group_mask.repeat_interleave(E // n_group, dim=1)
    masked = c.masked_fill(~expert_mask, float("-inf"))
    ids = torch.sort(masked, dim=-1, descending=True, stable=True).indices[:, :top_k]
    w = s.gather(1, ids)
    w = w / w.sum(dim=-1, keepdim=True) * routed_scaling_factor
    return w.float(), ids.to(torch.int32)
