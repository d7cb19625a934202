"""What a serving stack runs: vLLM's grouped_topk (its fused CUDA op for sigmoid + bias on
NVIDIA, aiter's on ROCm) with renormalize=True, called with routed_scaling_factor = 1 and the
factor applied after it (vLLM versions differ in where they apply the factor); else the
torch composition: torch.topk throughout, the group and expert choices made on float64 keys
that break ties toward the lower index (torch.topk alone does not promise it: each score is
lowered by less than half a float32 ulp times its index, so distinct float32 scores keep
their order). `IMPL` names the one the last call used (the result's baseline_impl)."""

import torch

IMPL = "torch"
_steps: dict = {}


def _tie_keys(x: torch.Tensor) -> torch.Tensor:
    """float64 keys whose descending order is (value descending, index ascending) for any
    finite float32 x (see route_topk_softmax's baseline: the same construction)."""
    n = x.shape[-1]
    step = _steps.get((n, x.device))
    if step is None:
        step = _steps[(n, x.device)] = (
            torch.arange(n, dtype=torch.float64, device=x.device) * 2.0**-40
        )
    xd = x.double()
    return torch.addcmul(xd, xd.abs().add_(2.0**-900), step, value=-1.0)


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
            hidden_states=x,
            gating_output=x,
            topk=top_k,
            renormalize=True,
            num_expert_group=n_group,
            topk_group=topk_group,
            scoring_func="sigmoid",
            routed_scaling_factor=1.0,
            e_score_correction_bias=bias,
        )
    except TypeError:
        return None


def _torch(x, bias, top_k, n_group, topk_group, factor):
    T, E = x.shape
    s = torch.sigmoid(x)
    u = s + bias
    group_scores = u.view(T, n_group, E // n_group).topk(2, dim=-1).values.sum(-1)
    kept = _tie_keys(group_scores).topk(topk_group, dim=-1).indices
    dropped = torch.ones(T, n_group, 1, dtype=torch.bool, device=x.device).scatter_(
        1, kept[:, :, None], False
    )
    keys = (
        _tie_keys(u).view(T, n_group, E // n_group).masked_fill_(dropped, float("-inf")).view(T, E)
    )
    ids = keys.topk(top_k, dim=-1).indices
    w = s.gather(1, ids)
    return w * (factor / w.sum(dim=-1, keepdim=True)), ids.to(torch.int32)


def _vllm(x, bias, top_k, n_group, topk_group, factor):
    got = _vendor(x, bias, top_k, n_group, topk_group)
    if got is None:
        return None
    w, ids = got
    return (w.float() * factor).contiguous(), ids.to(torch.int32).contiguous()


def _has_vllm() -> bool:
    """Whether vllm imports here: a plain import (the arena's scan notes importlib in any
    bundled file as in a candidate's)."""
    try:
        import vllm  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install is an absent one
        return False
    return True


IMPLS = {"vllm": _vllm if _has_vllm() else None, "torch": _torch}


def run(router_logits, e_score_correction_bias, top_k, n_group, topk_group, routed_scaling_factor):
    global IMPL
    x = router_logits.contiguous()
    args = (x, e_score_correction_bias, top_k, n_group, topk_group, routed_scaling_factor)
    if x.is_cuda and IMPLS["vllm"] is not None:
        got = _vllm(*args)
        if got is not None:
            IMPL = "vllm"
            return got
    IMPL = "torch"
    return _torch(*args)
