"""A routed MoE block's inputs: hidden states ~ N(0, 1); K distinct experts per token, the
top-K of random keys, uniform (S = 1) or with E/16 hot experts whose keys get +0.5 (S = 2:
each hot expert then serves about half the tokens at K/E = 1/16); routing weights a softmax
over the K slots (positive, summing to 1); expert weights scaled by 1/sqrt(fan-in) so that
gate, up and the output have unit-order values, as in a trained model."""

import torch


def make_inputs(axes, generator):
    T, H, I, E, K, S = axes["T"], axes["H"], axes["I"], axes["E"], axes["K"], axes["S"]
    dev = generator.device
    hidden = torch.randn(T, H, generator=generator, device=dev).to(torch.bfloat16)
    keys = torch.rand(T, E, generator=generator, device=dev)
    if S == 2:
        hot = torch.rand(E, generator=generator, device=dev).argsort()[: max(1, E // 16)]
        keys[:, hot] += 0.5
    topk_ids = keys.topk(K, dim=1).indices.to(torch.int32)
    topk_weights = torch.softmax(torch.randn(T, K, generator=generator, device=dev), dim=1)
    w13 = torch.randn(E, 2 * I, H, generator=generator, device=dev, dtype=torch.bfloat16).mul_(
        H**-0.5
    )
    w2 = torch.randn(E, H, I, generator=generator, device=dev, dtype=torch.bfloat16).mul_(
        2.0 * I**-0.5
    )
    return [hidden, topk_ids, topk_weights, w13, w2]
