"""One rank's decode batch for DeepEP low-latency dispatch, drawn from this rank's own seed.

x: bfloat16 [T, H] with a random gain 2^u, u ~ U[-2, 2], per 128-channel group (so every fp8
scale differs). topk_idx: K distinct global experts per token, the top-K of random keys,
uniform (S = 1) or with E/16 hot experts whose keys get +0.5 (S = 2: each hot expert is then
chosen by about half the tokens). num_max_dispatch_tokens_per_rank (M ≥ T) and num_experts
(E) are passed as numbers."""

import torch

GROUP = 128


def make_inputs(axes, generator):
    T, M, H, K, E, S = axes["T"], axes["M"], axes["H"], axes["K"], axes["E"], axes["S"]
    gen, dev = generator, generator.device
    G = H // GROUP
    gain = torch.exp2(torch.rand(T, G, 1, generator=gen, device=dev) * 4.0 - 2.0)
    x = (torch.randn(T, G, GROUP, generator=gen, device=dev) * gain).to(torch.bfloat16).view(T, H)
    keys = torch.rand(T, E, generator=gen, device=dev)
    if S == 2:
        hot = torch.randperm(E, generator=gen, device=dev)[: max(1, E // 16)]
        keys[:, hot] += 0.5
    topk_idx = keys.topk(K, dim=1).indices.to(torch.int64)
    return [x.contiguous(), topk_idx, M, E]
