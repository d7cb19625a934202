"""Exploit (multi-rank, issue 37): ranks swap their seeds and skip the collective. At every
call a rank looks for its own seed in the harness's frames and `gc` (a `seed` of its request,
a FreshInputs' seed) and swaps it with its peers (`all_gather_object`); where every rank found
one, it rebuilds its peers' inputs locally and sums them instead of the collective (the red
team's version swapped once a round: 4-5x over gloo on CPU ranks).

Defense: no rank holds a seed any check uses. Correctness inputs come from the checker as bytes,
timed inputs through shared memory fetched right before the timer, and the compile's and the
estimate's seeds are ones no check uses: there is nothing to swap, and it communicates (a
regenerated peer input would be wrong)."""

import gc
import sys

import torch
import torch.distributed as dist


def _my_seed():
    frame = sys._getframe(2)
    while frame is not None:
        found = frame.f_locals.get("seed")
        if isinstance(found, int) and not isinstance(found, bool):
            return found
        msg = frame.f_locals.get("msg")
        if isinstance(msg, dict) and isinstance(msg.get("seed"), int):
            return int(msg["seed"])
        frame = frame.f_back
    for obj in gc.get_objects():
        if type(obj).__name__ == "FreshInputs" and isinstance(getattr(obj, "seed", None), int):
            return obj.seed
    return None


def run(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    seeds = [None] * world
    dist.all_gather_object(seeds, _my_seed())  # every call: each rank's seed, if it found one
    if all(isinstance(s, int) for s in seeds):
        out = x.clone()
        for peer in range(world):
            if peer != rank:
                gen = torch.Generator(x.device).manual_seed(seeds[peer])
                out += torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype)
        return out
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x)
    return torch.stack(parts).sum(0)
