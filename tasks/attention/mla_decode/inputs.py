"""A paged latent cache with ragged context lengths whose total is exactly B·L.

Lengths come in pairs L + d, L - d with d drawn uniformly from [-(3L//4), 3L//4] (an odd
batch's last sequence has length L), in a drawn order; each sequence owns MP =
ceil((L + 3L//4) / P) pages of a pool of B·MP pages at randomly permuted page ids. q ~ N(0, 0.5²)
and the cache ~ N(0, 1), so the logits (scale 0.135, 576 dims) have standard deviation ~1.6:
DeepSeek's attention is peaked, not uniform. The scale is the task's fixed value."""

import torch

SCALE = (
    0.1352337788608801  # 192^-0.5 · (0.1·ln 40 + 1)², DeepSeek-V3's YaRN-corrected softmax scale
)


def make_inputs(axes, generator):
    B, L, P, H = (axes[a] for a in ("B", "L", "P", "H"))
    dev = generator.device
    spread = 3 * L // 4
    d = torch.randint(-spread, spread + 1, (B // 2,), generator=generator, device=dev)
    lens = torch.cat([L + d, L - d, torch.full((B % 2,), L, device=dev, dtype=d.dtype)])
    lens = lens[torch.randperm(B, generator=generator, device=dev)].to(torch.int32)
    MP = (L + spread + P - 1) // P
    block_table = (
        torch.randperm(B * MP, generator=generator, device=dev).to(torch.int32).view(B, MP)
    )
    q = torch.empty(B, H, 576, dtype=torch.bfloat16, device=dev).normal_(
        0.0, 0.5, generator=generator
    )
    ckv_cache = torch.empty(B * MP, P, 576, dtype=torch.bfloat16, device=dev).normal_(
        generator=generator
    )
    return [q, ckv_cache, block_table, lens, SCALE]
