"""Valid RoPE inputs: positions drawn uniformly from [0, P) (int64), q and k standard normal
(bfloat16), and a real cos/sin cache, float32 [P, d]: row p is
[cos(p·θ_0), …, cos(p·θ_{d/2-1}), sin(p·θ_0), …, sin(p·θ_{d/2-1})] with θ_i = base^(-2i/d),
base 1e6 (Qwen3; Llama-3.1 uses 5e5 with its frequency scaling, which changes the cache's
values, not the kernel). Vectorised torch on the generator's device: fast enough to refill
before every timed call."""

import torch

BASE = 1.0e6


def cos_sin_cache(P: int, d: int, device) -> torch.Tensor:
    inv_freq = BASE ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)
    angles = torch.arange(P, device=device, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(torch.float32)


def make_inputs(axes: dict[str, int], generator: torch.Generator) -> list:
    T, Hq, Hkv, d, P = axes["T"], axes["Hq"], axes["Hkv"], axes["d"], axes["P"]
    dev = generator.device
    positions = torch.randint(0, P, (T,), generator=generator, device=dev, dtype=torch.int64)
    q = torch.randn((T, Hq, d), generator=generator, device=dev, dtype=torch.float32).to(
        torch.bfloat16
    )
    k = torch.randn((T, Hkv, d), generator=generator, device=dev, dtype=torch.float32).to(
        torch.bfloat16
    )
    return [positions, q, k, cos_sin_cache(P, d, dev)]
