"""Router logits as a model produces them: the router GEMM's bfloat16 output, upcast to
float32 (so exact ties occur), uniform (S = 1) or with hot experts (S = 2)."""

import torch


def make_inputs(axes, generator):
    T, E, K, S = axes["T"], axes["E"], axes["K"], axes["S"]
    dev = generator.device
    logits = torch.randn(T, E, generator=generator, device=dev)
    if S == 2:
        # E/16 hot experts (at least one), a fresh random set per call, each +2: chosen by
        # most tokens, as after a load-imbalanced training run.
        hot = torch.rand(E, generator=generator, device=dev).argsort()[: max(1, E // 16)]
        logits[:, hot] += 2.0
    return [logits.to(torch.bfloat16).float(), K]
