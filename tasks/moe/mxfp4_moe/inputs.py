"""gpt-oss's routed experts in MXFP4 (OCP microscaling FP4): hidden states ~ N(0, 1); K distinct
experts per token, the top-K of random keys, uniform (S = 1) or with E/16 hot experts whose
keys get +0.5 (S = 2); routing weights a softmax over the K slots.

Each weight is an e2m1 code (a nibble: sign, two exponent bits, one mantissa bit, values
±{0, 0.5, 1, 1.5, 2, 3, 4, 6}) drawn uniformly, two per byte along the reduction dimension
(the low nibble is the even element), and every 32 consecutive elements share an E8M0 scale
byte s (the factor 2^(s − 127)), drawn around the exponent that gives the projection unit-order
outputs (gate and up about 3, so that the clamp at ±limit bites on a few percent of them) and
±1 from it per group. Biases ~ N(0, 0.5) (W13) and N(0, 0.3) (W2) in bfloat16; W2 is scaled so that the output is of
unit order (the activation has an rms of about 6.4)."""

import math

import torch

E2M1_RMS = math.sqrt(sum(v * v for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)) / 8)


def _mxfp4(E, N, KD, target_std, generator):
    """Packed codes [E, N, KD // 2] uint8 and scales [E, N, KD // 32] uint8 whose dequantized
    values have about `target_std`."""
    dev = generator.device
    packed = torch.randint(0, 256, (E, N, KD // 2), generator=generator, device=dev).to(torch.uint8)
    base = 127 + round(math.log2(target_std / E2M1_RMS))
    jitter = torch.randint(-1, 2, (E, N, KD // 32), generator=generator, device=dev)
    return packed, (base + jitter).to(torch.uint8)


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
    w13, w13_scale = _mxfp4(E, 2 * I, H, 3.0 * H**-0.5, generator)
    b13 = (torch.randn(E, 2 * I, generator=generator, device=dev) * 0.5).to(torch.bfloat16)
    w2, w2_scale = _mxfp4(E, H, I, 0.08 * I**-0.5, generator)  # a has rms ~6.4: out ~ 0.5
    b2 = (torch.randn(E, H, generator=generator, device=dev) * 0.3).to(torch.bfloat16)
    return [hidden, topk_ids, topk_weights, w13, w13_scale, b13, w2, w2_scale, b2, 7.0]
