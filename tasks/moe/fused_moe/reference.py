"""The routed experts of an MoE layer in float32: for every token t and slot j with expert
e = topk_ids[t, j] and weight w = topk_weights[t, j],
out[t] += w · W2_e · (silu(W1_e · x_t) ⊙ (W3_e · x_t)), where W1_e = w13[e, :I] (gate) and
W3_e = w13[e, I:] (up). One matmul pair per expert that has rows."""

import torch
import torch.nn.functional as F


def run(hidden, topk_ids, topk_weights, w13, w2):
    T, K = topk_ids.shape
    inter = w2.shape[2]
    x = hidden.float()
    out = torch.zeros(T, hidden.shape[1], dtype=torch.float32, device=hidden.device)
    flat = topk_ids.flatten().long()
    token = torch.arange(T * K, device=hidden.device) // K
    weight = topk_weights.flatten().float()
    for e in torch.unique(flat).tolist():
        rows = (flat == e).nonzero().flatten()
        gate_up = x[token[rows]] @ w13[e].float().T
        h = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        y = h @ w2[e].float().T
        out.index_add_(0, token[rows], y * weight[rows, None])
    return out
