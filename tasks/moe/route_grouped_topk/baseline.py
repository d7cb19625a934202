"""What a serving stack runs: vLLM's grouped_topk (its fused CUDA op for sigmoid + bias on
NVIDIA, aiter's on ROCm) with renormalize=True, called with routed_scaling_factor = 1 and the
factor applied after it (vLLM versions differ in where they apply the factor); else the
torch composition with stable sorts (torch.topk does not promise the lowest index on ties)."""

import torch


def _vendor(x, bias, top_k, n_group, topk_group):
    try:
        try:
            from vllm.model_executor.layers.fused_moe.fused_moe import grouped_topk
        except ImportError:
            from vllm.model_executor.layers.fused_moe import grouped_topk
    except ImportError:
        return None
    try:
        return grouped_topk(
            hidden_states=x, gating_output=x, topk=top_k, renormalize=True, num_expert_group=n_group,
            topk_group=topk_group, scoring_func="sigmoid", routed_scaling_factor=1.0, e_score_correction_bias=bias,
        )
    except TypeError:
        return None


def run(router_logits, e_score_correction_bias, top_k, n_group, topk_group, routed_scaling_factor):
    x = router_logits.contiguous()
    bias = e_score_correction_bias
    if x.device.type == "cuda":
        got = _vendor(x, bias, top_k, n_group, topk_group)
        if got is not None:
            w, ids = got
            return (w.float() * routed_scaling_factor).contiguous(), ids.to(torch.int32).contiguous()
    T, E = x.shape
    s = torch.sigmoid(x)
    u = s + bias
    group_scores = u.view(T, n_group, E // n_group).topk(2, dim=-1).values.sum(-1)
    kept = torch.sort(group_scores, dim=-1, descending=True, stable=True).indices[:, :topk_group]
    mask = torch.zeros(T, n_group, dtype=torch.bool, device=x.device).scatter_(1, kept, True)
    u = u.masked_fill(~mask.repeat_interleave(E // n_group, dim=1), float("-inf"))
    ids = torch.sort(u, dim=-1, descending=True, stable=True).indices[:, :top_k]
    w = s.gather(1, ids)
    return w / w.sum(dim=-1, keepdim=True) * routed_scaling_factor, ids.to(torch.int32)
