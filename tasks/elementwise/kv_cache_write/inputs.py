"""Valid inputs for reshape_and_cache_flash: k and v standard normal (bfloat16); both caches
filled with standard normal values too (so a slot the kernel must not touch is recognisable);
slot_mapping int64 [T]: T distinct slots drawn uniformly without replacement from the
NB·BS slots of the cache (slot = block · BS + offset), then about one token in eight set to
-1 (padding of a CUDA-graph batch: skip). Needs NB·BS ≥ T. Vectorised torch on the
generator's device: fast enough to refill before every timed call."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator) -> list:
    T, H, d, NB, BS = axes["T"], axes["Hkv"], axes["d"], axes["NB"], axes["BS"]
    dev = generator.device

    def normal(shape):
        return torch.randn(shape, generator=generator, device=dev, dtype=torch.float32).to(
            torch.bfloat16
        )

    k, v = normal((T, H, d)), normal((T, H, d))
    key_cache, value_cache = normal((NB, BS, H, d)), normal((NB, BS, H, d))
    slots = torch.randperm(NB * BS, generator=generator, device=dev)[:T].to(torch.int64)
    skip = torch.rand((T,), generator=generator, device=dev) < 0.125
    slot_mapping = torch.where(skip, torch.full_like(slots, -1), slots)
    return [k, v, key_cache, value_cache, slot_mapping]
