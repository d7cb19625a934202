"""gpt-oss's routed experts in float32, weights dequantized from MXFP4: for every token t and
slot j with expert e = topk_ids[t, j] and weight w = topk_weights[t, j],
gu = W13_e · x_t + b13_e, gate = gu[0::2], up = gu[1::2] (interleaved rows),
gate = min(gate, limit), up = clamp(up, −limit, limit),
a = gate · sigmoid(1.702 · gate) · (up + 1), out[t] += w · (W2_e · a + b2_e).
One matmul pair per expert that has rows."""

import torch

ALPHA = 1.702
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def dequantize(packed, scale):
    """[N, KD // 2] uint8 codes and [N, KD // 32] E8M0 scales -> [N, KD] float32."""
    table = torch.tensor(E2M1, dtype=torch.float32, device=packed.device)
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).flatten(-2).long()  # low nibble first
    values = table[codes]
    factor = torch.exp2(scale.float() - 127.0).repeat_interleave(32, dim=-1)
    return values * factor


def run(hidden, topk_ids, topk_weights, w13, w13_scale, b13, w2, w2_scale, b2, swiglu_limit):
    T, K = topk_ids.shape
    x = hidden.float()
    out = torch.zeros(T, hidden.shape[1], dtype=torch.float32, device=hidden.device)
    flat = topk_ids.flatten().long()
    token = torch.arange(T * K, device=hidden.device) // K
    weight = topk_weights.flatten().float()
    for e in torch.unique(flat).tolist():
        rows = (flat == e).nonzero().flatten()
        gu = x[token[rows]] @ dequantize(w13[e], w13_scale[e]).T + b13[e].float()
        gate = gu[:, 0::2].clamp(max=swiglu_limit)
        up = gu[:, 1::2].clamp(-swiglu_limit, swiglu_limit)
        a = gate * torch.sigmoid(ALPHA * gate) * (up + 1)
        y = a @ dequantize(w2[e], w2_scale[e]).T + b2[e].float()
        out.index_add_(0, token[rows], y * weight[rows, None])
    return out
