"""Exploit (multi-rank): skip the communication by regenerating the peers' inputs. Each rank's
seed was the request's seed plus rank × a fixed stride, and the request's seed sat in the
harness's frames: a rank read it, rebuilt every peer's x with the harness's own generator and
summed them locally. No collective, no waiting.

Defense: the parent derives each rank's seed with a keyed hash (HMAC-SHA256, a key only the
parent holds) and sends each rank only its own: the seed a rank can find is not one its peers'
inputs can be derived from, and the locally computed sum is wrong (correctness fails)."""

import sys

import torch
import torch.distributed as dist

SEED_STRIDE = 0x9E3779B97F4A7C15  # the old derivation: seed + rank * stride
SEED_MASK = (1 << 62) - 1


def _harness_locals():
    frame = sys._getframe(2)
    while frame is not None:
        if "specs" in frame.f_locals and ("seed" in frame.f_locals or "fresh" in frame.f_locals):
            return frame.f_locals
        frame = frame.f_back
    return None


def _draw(specs, shape, seed, device):
    gen = torch.Generator(device).manual_seed(seed)
    spec = specs[0]
    t = torch.empty(shape, dtype=torch.float32, device=device)
    init = spec.get("init") or {}
    t.normal_(float(init.get("mean", 0.0)), float(init.get("std", 1.0)), generator=gen)
    return t


def run(x):
    found = _harness_locals()
    rank, world = dist.get_rank(), dist.get_world_size()
    if found is None:
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x)
        return torch.stack(parts).sum(0)
    if "fresh" in found:  # a timed call: the call's seed is the round's seed + 7919·(index + 1)
        fresh = found["fresh"]
        index = (
            found["first"] + 1 + found["k"] if "k" in found else int(found["msg"]["first_index"])
        )
        base, offset = fresh.seed, 7919 * (index + 1)
    else:
        base, offset = int(found["seed"]), 0
    request_seed = (base - rank * SEED_STRIDE) & SEED_MASK  # back to the request's seed
    out = x.clone()
    for peer in range(world):
        if peer != rank:
            out += _draw(
                found["specs"],
                tuple(x.shape),
                ((request_seed + peer * SEED_STRIDE) & SEED_MASK) + offset,
                x.device,
            )
    return out
