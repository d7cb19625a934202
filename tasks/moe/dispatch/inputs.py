"""One rank's tokens for DeepEP normal-mode dispatch: fp8 activations with 1×128 block
scales and the router's choice, drawn from this rank's own seed.

x: bfloat16-like data with a random gain 2^u, u ~ U[-2, 2], per 128-channel group (so every
scale differs), quantized as DeepEP/DeepGEMM do (scale = max(absmax, 1e-4) / 448, float8_e4m3fn,
OCP). topk_idx: K distinct global experts per token, the top-K of random keys, uniform (S = 1)
or with E/16 hot experts whose keys get +0.5 (S = 2: each hot expert is then chosen by about
half the tokens, so the ranks that hold them receive far more). topk_weights: positive,
summing to 1 per token (renormalised top-K routing)."""

import torch

GROUP = 128
FP8_MAX = 448.0


def routing(T: int, K: int, E: int, S: int, gen: torch.Generator) -> torch.Tensor:
    dev = gen.device
    keys = torch.rand(T, E, generator=gen, device=dev)
    if S == 2:
        hot = torch.randperm(E, generator=gen, device=dev)[: max(1, E // 16)]
        keys[:, hot] += 0.5
    return keys.topk(K, dim=1).indices.to(torch.int64)


def make_inputs(axes, generator):
    T, H, K, E, S = axes["T"], axes["H"], axes["K"], axes["E"], axes["S"]
    gen, dev = generator, generator.device
    G = H // GROUP
    gain = torch.exp2(torch.rand(T, G, 1, generator=gen, device=dev) * 4.0 - 2.0)
    y = (torch.randn(T, G, GROUP, generator=gen, device=dev) * gain).to(torch.bfloat16).float()
    scale = y.abs().amax(dim=-1).clamp_min(1e-4) / FP8_MAX
    x = (y / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(T, H)
    topk_idx = routing(T, K, E, S, gen)
    w = torch.rand(T, K, generator=gen, device=dev) + 0.05
    w = w / w.sum(dim=1, keepdim=True)
    return [x.contiguous(), scale.contiguous(), topk_idx, w.contiguous(), E]
