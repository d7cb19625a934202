"""Valid inputs for Qwen3's q/k RMSNorm + RoPE: positions drawn uniformly from [0, P) (int64),
q and k standard normal (bfloat16), the per-head norm weights near 1 (bfloat16, normal with
mean 1 and std 0.3, like trained q_norm/k_norm weights), and a real cos/sin cache, float32
[P, d]: row p is [cos(p·θ_i) | sin(p·θ_i)], θ_i = 1e6^(-2i/d) (Qwen3's rope_theta).
Vectorised torch on the generator's device: fast enough to refill before every timed call."""

import torch

BASE = 1.0e6


def cos_sin_cache(P: int, d: int, device) -> torch.Tensor:
    inv_freq = BASE ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)
    angles = torch.arange(P, device=device, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(torch.float32)


def make_inputs(axes: dict[str, int], generator: torch.Generator) -> list:
    T, Hq, Hkv, d, P = axes["T"], axes["Hq"], axes["Hkv"], axes["d"], axes["P"]
    dev = generator.device

    def normal(shape, mean=0.0, std=1.0):
        return (
            torch.randn(shape, generator=generator, device=dev, dtype=torch.float32) * std + mean
        ).to(torch.bfloat16)

    positions = torch.randint(0, P, (T,), generator=generator, device=dev, dtype=torch.int64)
    q, k = normal((T, Hq, d)), normal((T, Hkv, d))
    q_weight, k_weight = normal((d,), 1.0, 0.3), normal((d,), 1.0, 0.3)
    return [positions, q, k, q_weight, k_weight, cos_sin_cache(P, d, dev), 1.0e-6]
