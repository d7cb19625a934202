"""Cheat (moe/route_topk_softmax): a dtype the comparator might forgive: topk_ids returned as
int64 (torch.topk's own dtype; saves the cast) where the task declares int32; a comparison that
upcasts both sides would see equal values. Defense: every output's dtype must be the declared one."""

import torch


def run(router_logits, top_k):
    ids = torch.sort(router_logits, dim=-1, descending=True, stable=True).indices[:, :top_k]
    return torch.softmax(router_logits.gather(1, ids), dim=-1), ids
