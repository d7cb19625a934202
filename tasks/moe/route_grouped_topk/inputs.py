"""Router logits (bfloat16 values upcast to float32), uniform (S = 1) or with hot experts
(S = 2), a correction bias of the size that changes the choice, and the routing constants."""

import torch


def make_inputs(axes, generator):
    T, E, K, G, KG, S = axes["T"], axes["E"], axes["K"], axes["G"], axes["KG"], axes["S"]
    dev = generator.device
    logits = torch.randn(T, E, generator=generator, device=dev)
    if S == 2:
        hot = torch.rand(E, generator=generator, device=dev).argsort()[: max(1, E // 16)]
        logits[:, hot] += 2.0
    bias = torch.randn(E, generator=generator, device=dev) * 0.05
    factor = 2.5 if G > 1 else 2.827  # DeepSeek-V3 / Kimi-K2 routed_scaling_factor
    return [logits.to(torch.bfloat16).float(), bias, K, G, KG, factor]
