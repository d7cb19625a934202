"""Softmax top-k routing with renormalisation, in float64: the K largest logits of each row
(stable descending sort, so among equal logits the lowest index comes first), weights
exp(x[e]) / Σ_chosen exp(x[e']) returned as float32, ids as int32, in descending order."""

import torch


def run(router_logits: torch.Tensor, top_k: int):
    x = router_logits.double()
    ids = torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :top_k]
    probs = torch.softmax(x, dim=-1)
    w = probs.gather(1, ids)
    w = w / w.sum(dim=-1, keepdim=True)
    return w.float(), ids.to(torch.int32)
