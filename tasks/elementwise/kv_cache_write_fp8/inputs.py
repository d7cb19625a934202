"""Valid inputs for reshape_and_cache_flash with an fp8 cache: k and v standard normal
(bfloat16); per-tensor scales k_scale and v_scale drawn in [1/64, 1/16] (so k / k_scale spans
the e4m3 range and its largest values saturate at ±448); both caches filled with fp8 values
(so a slot the kernel must not touch is recognisable); slot_mapping int64 [T]: T distinct
slots drawn without replacement from the NB·BS slots, about one token in eight set to -1
(padding: skip). Needs NB·BS ≥ T."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator) -> list:
    T, H, d, NB, BS = axes["T"], axes["Hkv"], axes["d"], axes["NB"], axes["BS"]
    dev = generator.device

    def normal(shape, scale=1.0):
        return torch.randn(shape, generator=generator, device=dev, dtype=torch.float32) * scale

    k, v = normal((T, H, d)).to(torch.bfloat16), normal((T, H, d)).to(torch.bfloat16)
    key_cache = normal((NB, BS, H, d), 32.0).to(torch.float8_e4m3fn)
    value_cache = normal((NB, BS, H, d), 32.0).to(torch.float8_e4m3fn)
    slots = torch.randperm(NB * BS, generator=generator, device=dev)[:T].to(torch.int64)
    skip = torch.rand((T,), generator=generator, device=dev) < 0.125
    slot_mapping = torch.where(skip, torch.full_like(slots, -1), slots)
    scales = 1.0 / (16.0 + 48.0 * torch.rand((2, 1), generator=generator, device=dev))
    return [k, v, key_cache, value_cache, slot_mapping, scales[0].clone(), scales[1].clone()]
