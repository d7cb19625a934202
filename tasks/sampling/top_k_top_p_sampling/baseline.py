"""FlashInfer's top_k_top_p_sampling_from_logits (filter_apply_order="top_k_first": top-k,
renormalise, top-p; sorting-free rejection sampling) on CUDA where importable; otherwise the
torch composition vLLM falls back to: softmax, sort, top-k mask, cumsum, top-p mask,
renormalise, torch.multinomial (task.yaml `baselines:`). `IMPL` names the one the last
call used (the result's baseline_impl)."""

import torch

IMPL = "torch"

try:
    from flashinfer.sampling import top_k_top_p_sampling_from_logits as _fi_sample
except Exception:  # noqa: BLE001 - not installed, or no GPU build
    _fi_sample = None


def _torch_sample(logits, top_k, top_p):
    B, V = logits.shape
    s, idx = torch.sort(logits, dim=-1, descending=True)
    k = top_k.long().clamp(1, V)
    kth = s.gather(1, (k - 1)[:, None])
    s = s.masked_fill(s < kth, float("-inf"))  # top-k (ties at the k-th value kept)
    p = torch.softmax(s, dim=-1)  # renormalised over the top-k set
    above = torch.cumsum(p, dim=-1) - p  # mass of the more probable tokens
    p = p.masked_fill(above >= top_p[:, None], 0.0)  # top-p: smallest set reaching top_p
    choice = torch.multinomial(p, 1)  # multinomial renormalises
    return idx.gather(1, choice).squeeze(1)


def _flashinfer(logits, top_k, top_p):
    return _fi_sample(logits, top_k, top_p, filter_apply_order="top_k_first").to(torch.int64)


IMPLS = {"flashinfer": _flashinfer if _fi_sample is not None else None, "torch": _torch_sample}


def run(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor):
    global IMPL
    IMPL = "flashinfer" if logits.is_cuda and _fi_sample is not None else "torch"
    return IMPLS[IMPL](logits, top_k, top_p)
